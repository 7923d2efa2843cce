// A real node: the kubelet built from the pinned k8s.io/kubernetes, with Debian's
// containerd (its CRI plugin) and runc, running real containers on this machine. No
// image can be pulled here, so ./images/build.sh makes two (busybox, pause) and they are
// imported before the kubelet starts; pods use them with imagePullPolicy: Never.
//
// Everything lives under one work directory (/tmp/ownerrefs-node-*): containerd's root,
// state and socket, the kubelet root, CNI state, logs. The kubelet and the API server
// speak over 127.0.0.1 only (the control plane's egress proxy, see egress.ts); pods on the
// node's bridge reach the API server through a relay at its gateway (apiforpods.ts).
//
// Teardown, in order, because each layer leaves something behind otherwise:
//   1. delete every pod on the node (and the DaemonSets that would put theirs back) and wait
//      until containerd runs no task: the kubelet stops the sandboxes through the CRI, which
//      also runs CNI DEL
//   2. stop the kubelet, then containerd, then the relay for pods
//   3. kill containerd shims that outlived it (they are not its children), and any process
//      still in one of this node's pod cgroups (a container the drain left running)
//   4. unmount what is still mounted below the work directory (volumes, overlay, shm)
//   5. remove the work directory, the node's CNI bridge and (last node out) the pod cgroups
// A run that crashed before its teardown is reaped the same way on the next start.

import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { writeKubeconfig } from '../controlplane/certs.ts';
import { olderRelease, type ControlPlane } from '../controlplane/controlplane.ts';
import { freePort } from '../controlplane/net.ts';
import { startApiForPods, type ApiForPods } from './apiforpods.ts';
import { mergePatch } from '../patch.ts';
import { ownerAlive, reapStale, Supervisor, type Component } from '../controlplane/process.ts';
import { waitFor } from '../wait.ts';

const run = promisify(execFile);

const NODE_WORKDIR_PREFIX = 'ownerrefs-node-';
/** The images ./build.sh makes; pods use them with imagePullPolicy: Never. */
export const IMAGES = { busybox: 'localhost/ownerrefs/busybox:local', pause: 'localhost/ownerrefs/pause:local' } as const;
const CONTAINER_LOG_LINKS = '/var/log/containers';

/**
 * Each node its own CNI bridge and pod subnet (10.244.N.0/24), named from its work
 * directory, so two real nodes (a test run beside a demo, say) never share IP addresses.
 */
function network(workDir: string): { bridge: string; subnet: string } {
  const id = path.basename(workDir).slice(NODE_WORKDIR_PREFIX.length);
  const n = 10 + ([...id].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) % 240);
  return { bridge: `orf-${id}`.slice(0, 15), subnet: `10.244.${n}.0/24` };
}

export interface RealNode {
  readonly name: string;
  readonly kubeletRoot: string;
  readonly workDir: string;
  readonly logsDir: string;
  /** SIGTERM the kubelet and start it again on the same root (volume reconstruction). */
  restartKubelet(): Promise<void>;
  /** Imports an OCI image archive into the node's containerd (the kubelet's image store); returns the names imported. */
  importImage?(archive: string): Promise<string>;
  /** Gives an image the node has another name too (the name a manifest pulls, with no registry here). */
  tagImage?(source: string, target: string): Promise<void>;
  /** The kubelet's and containerd's process ids (a benchmark weights the node's side). */
  pids?(): number[];
  /** How pods on the node's bridge reach the API server (in place of the `kubernetes` Service). */
  apiForPods?: ApiForPods;
  stop(): Promise<void>;
}

/**
 * What a real node needs of the machine; empty when it has everything.
 * OWNERREFS_REAL_NODE=off pretends something is missing (to exercise the fallbacks).
 */
export function missingForRealNode(): string[] {
  const missing: string[] = [];
  if (process.env.OWNERREFS_REAL_NODE === 'off') missing.push('permission to use one (OWNERREFS_REAL_NODE=off)');
  if (process.getuid?.() !== 0) missing.push('root');
  for (const bin of ['containerd', 'runc', 'ctr']) if (!onPath(bin)) missing.push(bin);
  // The node's two images are made here (./images/build.sh), from busybox-static and gcc.
  for (const bin of ['busybox', 'gcc']) if (!onPath(bin)) missing.push(`${bin} (to make the node's images)`);
  if (!existsSync('/usr/lib/cni/bridge')) missing.push('CNI plugins (/usr/lib/cni)');
  if (!existsSync('/sys/fs/cgroup/memory') && !existsSync('/sys/fs/cgroup/cgroup.controllers')) missing.push('cgroups');
  return missing;
}

/**
 * The directory with the kubelet and the hollow kubelet, built by ./build.sh on a miss; with
 * OWNERREFS_K8S set, that older release's kubelet (no hollow kubelet there).
 */
export async function nodeBinaries(): Promise<string> {
  const older = olderRelease();
  return older ? buildScript('../versions/build.sh', older) : buildScript('build.sh');
}

/** The directory with the real node's image archives, made by ./images/build.sh on a miss. */
export async function nodeImages(): Promise<string> {
  return buildScript('images/build.sh');
}

async function buildScript(script: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('bash', [path.join(import.meta.dirname, script), ...args], { maxBuffer: 1 << 20 });
  return stdout.trim().split('\n').pop() ?? '';
}

export async function startRealNode(opts: { cp: ControlPlane; name: string; binDir: string; imagesDir: string }): Promise<RealNode> {
  await reapLeftoverNodes();
  const workDir = await mkdtemp(path.join(os.tmpdir(), NODE_WORKDIR_PREFIX));
  const logsDir = path.join(workDir, 'logs');
  const kubeletRoot = path.join(workDir, 'kubelet');
  const sock = path.join(workDir, 'containerd.sock');
  await Promise.all([logsDir, kubeletRoot, path.join(workDir, 'cni', 'net.d')].map((d) => mkdir(d, { recursive: true })));
  const sup = new Supervisor(workDir, logsDir);
  let kubelet: Component | undefined;
  let containerd: Component | undefined;
  let apiForPods: ApiForPods | undefined;
  const stop = async () => {
    // Step 1; on failure step 3 kills what the drain left running.
    await drain(opts.cp, opts.name, sock).catch((err: unknown) => console.error(`node ${opts.name}: drain failed (${err instanceof Error ? err.message : String(err)}); killing its containers directly`));
    if (kubelet) await sup.terminate(kubelet); // step 2
    if (containerd) await sup.terminate(containerd);
    await apiForPods?.close();
    await sup.close();
    await cleanUp(workDir); // steps 3-5
  };
  try {
    await writeContainerdConfig(workDir, sock);
    const { bridge, subnet } = network(workDir);
    apiForPods = await startApiForPods(bridge, subnet, opts.cp.server);
    containerd = sup.spawn({ name: 'containerd', bin: which('containerd'), args: ['--config', path.join(workDir, 'containerd.toml')] });
    const c = containerd;
    await waitFor(async () => c.exited ? Promise.reject(new Error('containerd exited')) : (await ctr(sock, ['version'])) !== undefined,
      { timeoutMs: 60_000, describe: 'containerd serving', diagnostics: () => tail(logsDir, 'containerd') });
    for (const image of ['busybox.tar', 'pause.tar']) await ctr(sock, ['images', 'import', path.join(opts.imagesDir, image)]);

    const cert = await opts.cp.issueClientCert(`kubelet-${opts.name}`, `/O=system:nodes/CN=system:node:${opts.name}`);
    const kubeconfig = path.join(workDir, 'kubelet.kubeconfig');
    await writeKubeconfig(kubeconfig, opts.cp.server, opts.cp.caPath, cert, `system:node:${opts.name}`);
    const config = path.join(workDir, 'kubelet-config.json');
    const minor = Number(/v1\.(\d+)\./.exec((await run(path.join(opts.binDir, 'kubelet'), ['--version'])).stdout)?.[1] ?? 99);
    await writeFile(config, JSON.stringify(kubeletConfig({ workDir, caPath: opts.cp.caPath, sock, port: await freePort(), healthzPort: await freePort(), minor })));
    const kubeletSpec = {
      name: 'kubelet', bin: path.join(opts.binDir, 'kubelet'),
      args: [`--config=${config}`, `--kubeconfig=${kubeconfig}`, `--root-dir=${kubeletRoot}`, `--cert-dir=${path.join(workDir, 'kubelet-pki')}`,
        `--hostname-override=${opts.name}`, `--node-ip=${nodeIP()}`, '--v=2'],
    };
    kubelet = sup.spawn(kubeletSpec);
    await waitForReady(opts.cp, opts.name, () => kubelet!.exited, logsDir);
    return {
      name: opts.name, kubeletRoot, workDir, logsDir, apiForPods,
      pids: () => [kubelet, containerd].flatMap((c) => (c && !c.exited ? [c.pid] : [])),
      async importImage(archive: string) {
        try {
          return (await run('ctr', ['--address', sock, '--namespace', 'k8s.io', 'images', 'import', archive], { maxBuffer: 1 << 20 })).stdout;
        } catch (err) {
          throw new Error(`ctr could not import ${archive}: ${(err as { stderr?: string }).stderr?.trim() || String(err)}`, { cause: err });
        }
      },
      async tagImage(source: string, target: string) {
        if (await ctr(sock, ['images', 'tag', '--force', source, target]) === undefined) throw new Error(`ctr could not tag ${source} as ${target}`);
      },
      async restartKubelet() {
        if (kubelet) await sup.terminate(kubelet);
        kubelet = sup.spawn(kubeletSpec);
        await waitForReady(opts.cp, opts.name, () => kubelet!.exited, logsDir);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function kubeletConfig(o: { workDir: string; caPath: string; sock: string; port: number; healthzPort: number; minor: number }): object {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: '127.0.0.1', port: o.port, readOnlyPort: 0, healthzBindAddress: '127.0.0.1', healthzPort: o.healthzPort,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: o.caPath } },
    authorization: { mode: 'Webhook' },
    containerRuntimeEndpoint: `unix://${o.sock}`,
    podLogsDir: path.join(o.workDir, 'pod-logs'), // not the host's /var/log/pods
    // This machine: cgroup v1 (hybrid), no systemd, swap allowed, a small shared disk.
    cgroupDriver: 'cgroupfs', failSwapOn: false,
    ...(o.minor >= 31 ? { failCgroupV1: false } : {}), // a field of 1.31 and later (strict decoding refuses it before)
    evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    // The imported images cannot be pulled again: never collect them.
    imageGCHighThresholdPercent: 100, imageGCLowThresholdPercent: 99,
    makeIPTablesUtilChains: false, serializeImagePulls: false,
    nodeStatusUpdateFrequency: '4s', syncFrequency: '10s',
  };
}

async function writeContainerdConfig(workDir: string, sock: string): Promise<void> {
  const cni = path.join(workDir, 'cni');
  // restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE; without it every sandbox
  // fails with "can't get final child's PID from pipe: EOF".
  await writeFile(path.join(workDir, 'containerd.toml'), `version = 2
root = "${workDir}/containerd/root"
state = "${workDir}/containerd/state"
[grpc]
  address = "${sock}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${IMAGES.pause}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cni}/net.d"
`);
  const { bridge, subnet } = network(workDir);
  await writeFile(path.join(cni, 'net.d', '10-ownerrefs.conflist'), JSON.stringify({
    cniVersion: '0.4.0', name: 'ownerrefs',
    plugins: [
      { type: 'bridge', bridge, isGateway: true, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir: `${cni}/ipam` } },
      { type: 'loopback' },
    ],
  }));
}

async function waitForReady(cp: ControlPlane, name: string, dead: () => boolean, logsDir: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  await waitFor(async () => {
    if (dead()) throw new Error('the kubelet exited');
    const node = await core.readNode({ name });
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    return ready && !(node.spec?.taints ?? []).some((t) => t.key === 'node.kubernetes.io/not-ready');
  }, { timeoutMs: 120_000, describe: `node ${name} Ready and untainted`, diagnostics: () => tail(logsDir, 'kubelet') });
}

/**
 * Step 1: a NoExecute taint (no ordinary pod comes back), the DaemonSets of the node's
 * pods deleted (theirs would), every pod on the node deleted at once, and no task left in
 * containerd.
 */
async function drain(cp: ControlPlane, name: string, sock: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const node = await core.readNode({ name });
  await core.patchNode({ name, body: { spec: { taints: [...node.spec?.taints ?? [], { key: 'ownerrefs.dev/teardown', effect: 'NoExecute' }] } } }, mergePatch);
  const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${name}` });
  // A DaemonSet pod that tolerates every taint (a node agent's does) comes back as fast as
  // it is deleted, so its DaemonSet goes first: the cluster ends with the node anyway.
  const apps = kc.makeApiClient(AppsV1Api);
  const daemonSets = new Map(pods.items.flatMap((p) => (p.metadata?.ownerReferences ?? []).filter((o) => o.kind === 'DaemonSet')
    .map((o) => [`${p.metadata!.namespace}/${o.name}`, { namespace: p.metadata!.namespace!, name: o.name }] as const)));
  await Promise.all([...daemonSets.values()].map((d) => apps.deleteNamespacedDaemonSet({ ...d, propagationPolicy: 'Orphan' }).catch(() => undefined)));
  await Promise.all(pods.items.map((p) => core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: p.metadata!.namespace!, gracePeriodSeconds: 0 }).catch(() => undefined)));
  await waitFor(async () => ((await ctr(sock, ['tasks', 'ls', '-q'])) ?? '').trim() === '', { timeoutMs: 60_000, describe: 'no container left running' });
}

/** Steps 3-5, for a node of this run or one a crashed run left. */
async function cleanUp(workDir: string): Promise<void> {
  const pods = new Set(readDir(path.join(workDir, 'kubelet', 'pods')));
  const procs = readdirSync('/proc').filter((p) => /^\d+$/.test(p))
    .map((pid) => ({ pid: Number(pid), cmdline: readText(`/proc/${pid}/cmdline`), cgroup: readText(`/proc/${pid}/cgroup`) }));
  for (const pid of leftoverPids(procs, workDir, pods)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
  const mounts = readText('/proc/mounts').split('\n').map((l) => l.split(' ')[1]?.replace(/\\040/g, ' ') ?? '')
    .filter((m) => m === workDir || m.startsWith(`${workDir}/`)).sort((a, b) => b.length - a.length);
  for (const m of mounts) await run('umount', ['-l', m]).catch(() => undefined);
  await rm(workDir, { recursive: true, force: true }).catch(() => undefined);
  // The kubelet links every container log into /var/log/containers, whatever podLogsDir says.
  for (const link of (existsSync(CONTAINER_LOG_LINKS) ? readdirSync(CONTAINER_LOG_LINKS) : []).map((n) => path.join(CONTAINER_LOG_LINKS, n))) {
    if (readLink(link).startsWith(`${workDir}/`)) await rm(link, { force: true });
  }
  await run('ip', ['link', 'del', network(workDir).bridge]).catch(() => undefined);
  if (!readdirSync(os.tmpdir()).some((d) => d.startsWith(NODE_WORKDIR_PREFIX))) removeCgroups('/sys/fs/cgroup', 'kubepods');
}

/**
 * Step 3's processes: this node's containerd shims, and every process in the cgroup of one
 * of this node's pods. A container whose sandbox the kubelet never stopped (a drain that
 * timed out: a DaemonSet pod tolerating the teardown taint comes back as fast as it is
 * deleted) keeps running after its shim is killed, reparented to init; other nodes' pods
 * share the kubepods hierarchy, so the pod's UID says whose it is.
 */
export function leftoverPids(procs: { pid: number; cmdline: string; cgroup: string }[], workDir: string, podUids: ReadonlySet<string>): number[] {
  return procs.filter(({ cmdline, cgroup }) => {
    const cmd = cmdline.split('\0');
    if (cmd[0]?.endsWith('containerd-shim-runc-v2') && cmd.some((a) => a.startsWith(workDir))) return true;
    // cgroupfs driver: .../kubepods/<qos>/pod<uid>/<container>; systemd: ...-pod<uid with _>.slice/...
    const m = /pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})/.exec(cgroup);
    return m !== null && podUids.has(m[1]!.replaceAll('_', '-'));
  }).map((p) => p.pid);
}

/** Removes every `name` cgroup below root, deepest first; a busy one is left. */
function removeCgroups(root: string, name: string): void {
  const walk = (dir: string, inside: boolean) => {
    let entries: string[];
    try { entries = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name); } catch { return; }
    for (const e of entries) walk(path.join(dir, e), inside || e === name);
    if (inside) try { rmdirSync(dir); } catch { /* busy or not a cgroup */ }
  };
  for (const controller of readdirSync(root)) walk(path.join(root, controller), false);
}

/** A run that died without its teardown: kill what it started, unmount, remove. */
export async function reapLeftoverNodes(): Promise<void> {
  for (const d of readdirSync(os.tmpdir()).filter((x) => x.startsWith(NODE_WORKDIR_PREFIX))) {
    const dir = path.join(os.tmpdir(), d);
    if (!ownerAlive(dir) && await reapStale(dir, { remove: false })) await cleanUp(dir); // other nodes of this process are not leftovers
  }
}

async function ctr(sock: string, args: string[]): Promise<string | undefined> {
  try {
    return (await run('ctr', ['--address', sock, '--namespace', 'k8s.io', ...args], { maxBuffer: 1 << 20 })).stdout;
  } catch {
    return undefined;
  }
}

/** The machine's first non-loopback IPv4 address: the kubelet refuses a loopback node IP. Reported, never dialled. */
function nodeIP(): string {
  for (const addrs of Object.values(os.networkInterfaces())) {
    const a = addrs?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  throw new Error('no non-loopback IPv4 address for the kubelet\'s --node-ip');
}

function which(bin: string): string {
  const p = onPath(bin);
  if (!p) throw new Error(`${bin} not found on PATH`);
  return p;
}

function onPath(bin: string): string | undefined {
  return (process.env.PATH ?? '').split(':').map((d) => path.join(d, bin)).find((p) => existsSync(p));
}

function readDir(p: string): string[] {
  try { return readdirSync(p); } catch { return []; }
}

function readLink(p: string): string {
  try { return readlinkSync(p); } catch { return ''; }
}

function readText(p: string): string {
  try { return readFileSync(p, 'utf8'); } catch { return ''; }
}

function tail(logsDir: string, name: string): string {
  return `--- ${name}.log ---\n${readText(path.join(logsDir, `${name}.log`)).split('\n').slice(-40).join('\n')}`;
}

