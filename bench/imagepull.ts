// How long a fresh node takes to get the agent running from its image: this checkout's image
// beside another commit's, each pulled from a registry on loopback into a real node's
// containerd that does not have it, as the DaemonSet's pod. Per run:
//
//   pull     the kubelet's own measure of the pull (its Pulled event: "in 1.2s"), which is
//            the download and unpacking of the layers by containerd;
//   started  from the DaemonSet's creation to the time the agent logs "agent started" (its
//            watches synced, its files served), on the same clock;
//   after    started less pull: scheduling, the container's creation, Node's and the agent's start.
//
// The two images alternate in order, one pair at a time; the node side (kubelet, containerd)
// is weighted as on a node whose control plane runs elsewhere (support/cpugroup.ts). A loopback
// registry has no network: on a cluster, add the image's compressed bytes over the node's
// bandwidth to `pull`.
//
//   npm run bench:image -- --before=REF [--pairs=5] [--node-cpu-shares=8192] [--out=FILE]
//
// REF's image is built by REF's own localcluster/image/build.sh in a git worktree.
// Results: bench/results/image-pull.json (or --out).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppsV1Api, type CoreV1Api, type KubernetesObject, type V1DaemonSet } from '@kubernetes/client-node';
import { apply, manifestObjects } from '../localcluster/agentproc.ts';
import { startLocalControlPlane, startRealOrHollowNode } from '../localcluster/clusters.ts';
import { missingForRealNode } from '../localcluster/node/realnode.ts';
import { freePort } from '../localcluster/webhookproc.ts';
import { TMP } from './support/agent.ts';
import { CpuGroup } from './support/cpugroup.ts';
import { loadavg, machine } from './support/machine.ts';
import { goDurationMs } from './support/goduration.ts';
import { dist, round, type Dist } from './support/stats.ts';

const { values: flags } = parseArgs({
  options: {
    before: { type: 'string' },
    pairs: { type: 'string', default: '5' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'image-pull.json') },
    'node-cpu-shares': { type: 'string', default: '8192' },
  },
});
const ROOT = path.join(import.meta.dirname, '..');
const NODE = 'bench-image-node';
const NS = 'ownerrefs-system';
const say = (s: string) => process.stdout.write(`${s}\n`);
const sh = (cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env) => execFileSync(cmd, args, { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'] });

type Arm = 'before' | 'after';
interface Run { arm: Arm; pullMs: number; startedMs: number; afterPullMs: number }

/** Builds an image with a tree's own build.sh, tagged; returns the tag's full name. */
function buildImage(tree: string, tag: string): string {
  const name = `localhost/ownerrefs/ownerrefs-agent:${tag}`;
  say(`building ${name} from ${path.relative(ROOT, tree) || 'this checkout'}`);
  sh('bash', [path.join(tree, 'localcluster', 'image', 'build.sh')], { ...process.env, OWNERREFS_IMAGE: name });
  return name;
}

/** REF's tree in a worktree, with this checkout's node_modules (its build.sh takes Node from there). */
function worktree(ref: string): string {
  const dir = path.join(TMP, 'image-before');
  if (existsSync(dir)) sh('git', ['worktree', 'remove', '--force', dir]);
  sh('git', ['worktree', 'add', '--detach', dir, ref]);
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

/** daemonset.yaml's DaemonSet for this node: the image from the registry, always pulled, on the host's network (no Service routing here; the probes come to the node's address), at the node's kubelet root. */
function daemonSet(image: string, server: URL, kubeletRoot: string, port: number): V1DaemonSet {
  const ds = JSON.parse(JSON.stringify(manifestObjects().find((o) => o.kind === 'DaemonSet')).replaceAll('/var/lib/kubelet', kubeletRoot)) as V1DaemonSet;
  const spec = ds.spec!.template.spec!;
  spec.hostNetwork = true;
  spec.dnsPolicy = 'ClusterFirstWithHostNet';
  const c = spec.containers[0]!;
  Object.assign(c, { image, imagePullPolicy: 'Always', ports: [{ name: 'http-health', containerPort: port, protocol: 'TCP' }] });
  c.args = c.args!.map((a) => (a.startsWith('--health-addr=') ? `--health-addr=0.0.0.0:${port}` : a));
  c.env = [...c.env ?? [], { name: 'KUBERNETES_SERVICE_HOST', value: server.hostname }, { name: 'KUBERNETES_SERVICE_PORT', value: server.port }];
  return ds;
}

async function waitUntil<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 300_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function measure(o: { core: CoreV1Api; apps: AppsV1Api; ds: V1DaemonSet; arm: Arm; forget: () => Promise<void> }): Promise<Run> {
  await o.forget();
  const t0 = Date.now();
  await o.apps.createNamespacedDaemonSet({ namespace: NS, body: o.ds });
  const started = await waitUntil(`the ${o.arm} agent started`, async () => {
    const pod = (await o.core.listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=ownerrefs-agent' })).items[0];
    if (!pod?.status?.containerStatuses?.[0]?.state?.running) return undefined;
    const log = await o.core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: NS });
    const line = log.split('\n').find((l) => l.includes('"msg":"agent started"'));
    return line ? { pod: pod.metadata!.name!, time: (JSON.parse(line) as { time: number }).time } : undefined;
  });
  const pulled = await waitUntil('the Pulled event', async () => (await o.core.listNamespacedEvent({ namespace: NS, fieldSelector: `involvedObject.name=${started.pod},reason=Pulled` })).items[0]?.message);
  const m = /Successfully pulled image "[^"]+" in (\S+)/.exec(pulled);
  if (!m) throw new Error(`the Pulled event does not say how long: ${pulled}`);
  const pullMs = goDurationMs(m[1]!);
  await o.apps.deleteNamespacedDaemonSet({ name: o.ds.metadata!.name!, namespace: NS, propagationPolicy: 'Foreground' });
  await waitUntil('the agent pod gone', async () => (await o.core.listNamespacedPod({ namespace: NS })).items.length === 0 || undefined);
  return { arm: o.arm, pullMs: round(pullMs, 1), startedMs: started.time - t0, afterPullMs: round(started.time - t0 - pullMs, 1) };
}

async function main(): Promise<void> {
  if (!flags.before) throw new Error('--before=REF: the commit whose image to compare with this checkout\'s');
  const missing = missingForRealNode();
  if (missing.length > 0) throw new Error(`no real node on this machine (it lacks ${missing.join(', ')}); npm run bench:image needs one`);
  const images: Record<Arm, string> = { before: buildImage(worktree(flags.before), 'bench-before'), after: buildImage(ROOT, 'bench-after') };
  const crane = path.join(sh('bash', ['localcluster/release/tools/build.sh', 'crane']).trim(), 'crane');
  const regPort = await freePort();
  const registry = spawn(crane, ['registry', 'serve', '--address', `127.0.0.1:${regPort}`], { stdio: 'ignore' });
  const reg = `127.0.0.1:${regPort}/ownerrefs-agent`;
  const lcp = await startLocalControlPlane({ realNodes: true });
  const node = await startRealOrHollowNode({ cp: lcp.cp, name: NODE, hollow: false });
  const shares = Number(flags['node-cpu-shares']);
  const group = shares > 0 ? CpuGroup.create('ownerrefs-bench-node', shares) : undefined;
  try {
    await waitUntil('the registry', async () => { sh(crane, ['catalog', '--insecure', `127.0.0.1:${regPort}`]); return true; }, 10_000);
    // Pushed as a release pushes them (scripts/release.sh): the layers as podman compresses them.
    const bytes = {} as Record<Arm, number>;
    for (const arm of ['before', 'after'] as const) {
      sh('podman', ['--runtime', 'runc', 'push', '--tls-verify=false', '--format', 'oci', images[arm], `docker://${reg}:${arm}`]);
      bytes[arm] = (JSON.parse(sh(crane, ['manifest', '--insecure', `${reg}:${arm}`])) as { layers: { size: number }[] }).layers.reduce((n, l) => n + l.size, 0);
      say(`${arm}: ${(bytes[arm] / 1e6).toFixed(1)} MB compressed`);
    }
    for (const pid of node.pids?.() ?? []) group?.add(pid);
    await apply(lcp.kc, manifestObjects().filter((o) => o.kind !== 'DaemonSet') as KubernetesObject[]);
    const apps = lcp.kc.makeApiClient(AppsV1Api);
    const port = await freePort();
    const server = new URL(lcp.cp.server);
    const ctr = (args: string[]) => sh('ctr', ['--address', path.join(node.workDir, 'containerd.sock'), '--namespace', 'k8s.io', ...args]);
    /**
     * The node forgets both images, as a fresh node has neither: once no container is left on
     * them (a snapshot still in use would spare the next pull its unpacking), every name of
     * theirs (tag, digest, image id) goes, and containerd collects their layers at once.
     */
    const forget = async () => {
      await waitUntil('no container on the images', async () => ctr(['containers', 'ls']).includes(`127.0.0.1:${regPort}/`) ? undefined : true);
      const rows = ctr(['images', 'ls']).trim().split('\n').slice(1).map((l) => l.split(/\s+/));
      const ours = new Set(rows.filter(([ref]) => ref!.startsWith(`127.0.0.1:${regPort}/`)).map((r) => r[2]));
      const refs = rows.filter((r) => ours.has(r[2])).map((r) => r[0]!);
      if (refs.length > 0) ctr(['images', 'rm', '--sync', ...refs]);
    };
    const runs: Run[] = [];
    for (let pair = 1; pair <= Number(flags.pairs); pair++) {
      const order: Arm[] = pair % 2 === 1 ? ['before', 'after'] : ['after', 'before'];
      for (const arm of order) {
        const r = await measure({ core: lcp.core, apps, ds: daemonSet(`${reg}:${arm}`, server, node.kubeletRoot, port), arm, forget });
        runs.push(r);
        say(`pair ${pair} ${arm}: pull ${r.pullMs} ms, agent started ${r.startedMs} ms after the DaemonSet's creation (${r.afterPullMs} ms after the pull)`);
      }
    }
    const of = (arm: Arm, k: 'pullMs' | 'startedMs' | 'afterPullMs'): Dist => dist(runs.filter((r) => r.arm === arm).map((r) => r[k]));
    const summary = Object.fromEntries((['before', 'after'] as const).map((arm) => [arm, { compressedBytes: bytes[arm], pull: of(arm, 'pullMs'), started: of(arm, 'startedMs'), afterPull: of(arm, 'afterPullMs') }]));
    const pairs = runs.filter((r) => r.arm === 'after').map((a, i) => ({ pullSavedMs: round(runs.filter((r) => r.arm === 'before')[i]!.pullMs - a.pullMs, 1),
      startedSavedMs: runs.filter((r) => r.arm === 'before')[i]!.startedMs - a.startedMs }));
    for (const arm of ['before', 'after'] as const) {
      const s = summary[arm]!;
      say(`${arm}: ${(s.compressedBytes / 1e6).toFixed(1)} MB; pull p50 ${s.pull.p50} ms (${s.pull.min} to ${s.pull.max}); started p50 ${s.started.p50} ms (${s.started.min} to ${s.started.max}); after the pull p50 ${s.afterPull.p50} ms`);
    }
    say(`saved per pair: pull ${pairs.map((p) => p.pullSavedMs).join(', ')} ms; started ${pairs.map((p) => p.startedSavedMs).join(', ')} ms`);
    const out = { date: new Date().toISOString(), machine: machine(), loadavg: loadavg(), before: flags.before, after: sh('git', ['rev-parse', '--short', 'HEAD']).trim(),
      nodeCpuShares: shares > 0 ? shares : undefined, method: 'each image pulled by a node that has neither, from a registry on loopback, as the DaemonSet\'s pod; the two alternate, one pair at a time',
      summary, pairs, runs };
    mkdirSync(path.dirname(flags.out!), { recursive: true });
    writeFileSync(flags.out!, JSON.stringify(out, null, 2) + '\n');
    say(`results in ${path.relative(process.cwd(), flags.out!)}`);
  } finally {
    await node.stop();
    group?.remove();
    await lcp.stop();
    registry.kill();
    rmSync(path.join(TMP, 'image-before', 'node_modules'), { force: true });
  }
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exit(1);
  });
}
