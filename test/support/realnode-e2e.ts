// Per-file e2e fixture on a real node: a private control plane that real kubelets can
// join, one real node (localcluster/node: the kubelet with containerd and runc), the
// agent as a real process on that node's kubelet root with the RBAC of daemonset.yaml,
// and a way to read files from inside a pod's container (exec through the API server).
//
// A machine without root, containerd, runc or cgroups cannot run a real node: the file
// then runs on a hollow node (kubemark's: real volume directories, no containers), says
// so, and reads the files on the host where it would have read them in the container;
// tests that need a container (its log, a read-only mount, a shell) are skipped there,
// with the reason printed. OWNERREFS_REAL_NODE=off forces that fallback.

import { AppsV1Api, CoreV1Api, StorageV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { agentKubeconfig, apply, manifestObjects, startAgentProcess, type AgentProcess } from '../../localcluster/agentproc.ts';
import { startLocalControlPlane, startRealOrHollowNode, type LocalControlPlane } from '../../localcluster/clusters.ts';
import type { ControlPlane } from '../../localcluster/controlplane/controlplane.ts';
import { tailLogs } from '../../localcluster/controlplane/logs.ts';
import { podExec } from '../../localcluster/exec.ts';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { missingForRealNode, type RealNode } from '../../localcluster/node/realnode.ts';
import { waitFor } from '../../localcluster/wait.ts';

export { IMAGES } from '../../localcluster/node/realnode.ts';

/** Why this machine cannot run a real node, or '' when it can. */
const REAL_NODE_MISSING = missingForRealNode().join(', ');
/** True when tests run in real containers; false on the hollow-node fallback. */
export const CONTAINERS = REAL_NODE_MISSING === '';
if (!CONTAINERS) {
  console.warn(`NO REAL NODE: this machine lacks ${REAL_NODE_MISSING}; real-node tests run on a hollow node, ` +
    'reading files on the host, and those that need a container are SKIPPED (CI installs what is needed and runs them all)');
}

export interface RealNodeE2E {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  cp: ControlPlane;
  /** The real node, or on the fallback a hollow node (restartKubelet is then unsupported). */
  node: RealNode;
  agent: AgentProcess;
  ns: string;
  /** Runs `command` in the pod's container; stdout, or a rejection with stderr and the exit status. */
  exec(pod: V1Pod, command: string[], container?: string): Promise<string>;
  /** Starts a new agent process (after the old one was stopped or killed). */
  restartAgent(): Promise<AgentProcess>;
  waitFor<T>(fn: () => T | Promise<T>, describe: string, timeoutMs?: number): Promise<NonNullable<T>>;
}

export function useRealNode(prefix: string, opts: { agentArgs?: (node: RealNode) => string[]; /** false: no agent process (the test runs its own) */ agent?: boolean;
  /** false: none of daemonset.yaml's objects either, nor an agent (a file that installs the product with helm) */ objects?: boolean; } = {}): RealNodeE2E {
  const e = {} as RealNodeE2E;
  let lcp: LocalControlPlane | undefined;
  const diagnostics = async () => [
    await e.agent?.report(),
    e.node ? tailLogs(e.node.logsDir, 30) : '',
    e.cp ? tailLogs(e.cp.logsDir, 15) : '',
  ].join('\n');
  e.waitFor = (fn, describe, timeoutMs = 60_000) => waitFor(fn, { timeoutMs, intervalMs: 100, describe, diagnostics });
  beforeAll(async () => {
    lcp = await startLocalControlPlane({ realNodes: true });
    e.cp = lcp.cp;
    e.kc = lcp.kc;
    e.core = lcp.core;
    e.apps = e.kc.makeApiClient(AppsV1Api);
    e.node = await startRealOrHollowNode({ cp: e.cp, name: `${prefix}-node`, hollow: !CONTAINERS });
    // The CSIDriver too (the kubelet looks it up on every publish); not the DaemonSet.
    if (opts.objects !== false) {
      await apply(e.kc, manifestObjects().filter((o) => o.kind === 'CSIDriver'));
      await e.kc.makeApiClient(StorageV1Api).readCSIDriver({ name: 'ownerrefs.dev' });
    }
    e.ns = `${prefix}-test`;
    await e.core.createNamespace({ body: { metadata: { name: e.ns } } });
    await e.waitFor(() => e.core.readNamespacedServiceAccount({ name: 'default', namespace: e.ns }), 'the default ServiceAccount');
    const agentKc = opts.objects === false ? '' : await agentKubeconfig(e.kc, e.node.workDir, { nodeName: e.node.name });
    e.restartAgent = async () => {
      if (!agentKc) throw new Error('useRealNode({ objects: false }) runs no agent process');
      e.agent = await startAgentProcess({ kubeconfig: agentKc, nodeName: e.node.name, kubeletRoot: e.node.kubeletRoot, args: opts.agentArgs?.(e.node) ?? [] });
      await e.waitFor(async () => (await e.agent.get('/readyz')).status === 200, 'agent ready');
      return e.agent;
    };
    if (opts.agent !== false && opts.objects !== false) await e.restartAgent();
    const exec = podExec(e.kc);
    e.exec = CONTAINERS
      ? (pod, command, container) => exec({ namespace: pod.metadata!.namespace!, name: pod.metadata!.name!, container: container ?? pod.spec!.containers[0]!.name }, command)
      : async (pod, command) => readOnHost(e.node.kubeletRoot, pod, command);
  }, 600_000);
  beforeEach((ctx) => {
    ctx.onTestFailed(async ({ task }) => console.error(`=== diagnostics for "${task.name}" ===\n${await diagnostics()}`));
  });
  afterAll(async () => {
    const code = await e.agent?.stop();
    await e.node?.stop();
    await lcp?.stop();
    if (code !== undefined && code !== 0) throw new Error(`agent exited ${code} on SIGTERM`);
  }, 300_000);
  return e;
}

/**
 * The fallback's stand-in for exec: `cat` and `ls` of /etc/podinfo, answered from the
 * volume directory that the container would have mounted there (emptyDir or CSI target).
 */
function readOnHost(kubeletRoot: string, pod: V1Pod, command: string[]): string {
  const [cmd, target] = command;
  if ((cmd !== 'cat' && cmd !== 'ls') || !target?.startsWith('/etc/podinfo') || command.length !== 2) {
    throw new Error(`no container on a hollow node: cannot run ${JSON.stringify(command)}`);
  }
  const volume = pod.spec!.volumes!.find((v) => v.name === 'podinfo')!;
  const volumes = path.join(kubeletRoot, 'pods', pod.metadata!.uid!, 'volumes');
  const dir = volume.csi ? path.join(volumes, 'kubernetes.io~csi', 'podinfo', 'mount') : path.join(volumes, 'kubernetes.io~empty-dir', 'podinfo');
  const onHost = path.join(dir, target.slice('/etc/podinfo'.length));
  return cmd === 'cat' ? readFileSync(onHost, 'utf8') : `${readdirSync(onHost).filter((n) => !n.startsWith('.')).sort().join('\n')}\n`;
}
