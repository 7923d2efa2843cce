// Hollow nodes, for many nodes on one machine: kubemark's hollow kubelet (the real kubelet
// code with a fake runtime and fake mounter, ./k8s/hollow), each with its own root,
// ports and node credentials, about 90 MB and little CPU each. Its volumes are real
// directories, so an agent pointed at its root serves its pods as on any node; no
// container runs, so nothing can be read from inside one (that is the real node's job).

import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { writeKubeconfig } from '../controlplane/certs.ts';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { freePort } from '../controlplane/net.ts';
import { ownerAlive, reapStale, Supervisor, type Component } from '../controlplane/process.ts';
import { waitFor } from '../wait.ts';

const HOLLOW_WORKDIR_PREFIX = 'ownerrefs-hollow-';

export interface HollowNode {
  readonly name: string;
  readonly kubeletRoot: string;
  readonly logsDir: string;
  /** The hollow kubelet's pid (while it runs). */
  readonly pid: number | undefined;
  /** SIGKILL, as a crash would. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * `memoryRoot`: the kubelet root on tmpfs (/dev/shm), as a `medium: Memory` emptyDir is on a
 * real node (the hollow kubelet's fake mounter mounts nothing: volumes are plain directories).
 */
export async function startHollowNode(opts: { cp: ControlPlane; name: string; binDir: string; memoryRoot?: boolean }): Promise<HollowNode> {
  await reapLeftoverHollowNodes();
  const workDir = await mkdtemp(path.join(os.tmpdir(), HOLLOW_WORKDIR_PREFIX));
  const logsDir = path.join(workDir, 'logs');
  const kubeletRoot = opts.memoryRoot ? await mkdtemp(path.join('/dev/shm', HOLLOW_WORKDIR_PREFIX)) : path.join(workDir, 'kubelet');
  await Promise.all([mkdir(logsDir), mkdir(kubeletRoot, { recursive: true })]);
  const sup = new Supervisor(workDir, logsDir);
  let kubelet: Component | undefined;
  const stop = async () => {
    if (kubelet) await sup.terminate(kubelet);
    await sup.close();
    await rm(workDir, { recursive: true, force: true });
    if (opts.memoryRoot) await rm(kubeletRoot, { recursive: true, force: true });
  };
  try {
    const cert = await opts.cp.issueClientCert(`hollow-${opts.name}`, `/O=system:nodes/CN=system:node:${opts.name}`);
    const kubeconfig = path.join(workDir, 'kubelet.kubeconfig');
    await writeKubeconfig(kubeconfig, opts.cp.server, opts.cp.caPath, cert, `system:node:${opts.name}`);
    kubelet = sup.spawn({
      name: 'hollow-kubelet', bin: path.join(opts.binDir, 'hollow'),
      args: [`--kubeconfig=${kubeconfig}`, `--name=${opts.name}`, `--root-dir=${kubeletRoot}`,
        `--port=${await freePort()}`, `--healthz-port=${await freePort()}`, '--v=1'],
    });
    const kc = new KubeConfig();
    kc.loadFromFile(opts.cp.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const k = kubelet;
    await waitFor(async () => {
      if (k.exited) throw new Error(`hollow kubelet ${opts.name} exited`);
      const node = await core.readNode({ name: opts.name });
      return node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' &&
        !(node.spec?.taints ?? []).some((t) => t.key === 'node.kubernetes.io/not-ready');
    }, { timeoutMs: 120_000, describe: `hollow node ${opts.name} Ready and untainted` });
    return {
      name: opts.name, kubeletRoot, logsDir,
      get pid() { return kubelet && !kubelet.exited ? kubelet.pid : undefined; },
      async kill() {
        if (kubelet) await sup.kill(kubelet);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Work directories of runs that died without their teardown (their watchdog killed the kubelets). */
async function reapLeftoverHollowNodes(): Promise<void> {
  for (const d of readdirSync(os.tmpdir()).filter((x) => x.startsWith(HOLLOW_WORKDIR_PREFIX))) {
    const dir = path.join(os.tmpdir(), d);
    if (!ownerAlive(dir)) await reapStale(dir); // other nodes of this very process are not leftovers
  }
}
