// Per-file e2e fixture on a real node: a private control plane that real kubelets can
// join, one real node (localcluster/node: the kubelet with containerd and runc), the
// agent as a real process on that node's kubelet root with the RBAC of daemonset.yaml,
// and a way to read files from inside a pod's container (exec through the API server).
//
// A machine without root, containerd, runc or cgroups cannot run a real node: the file's
// tests are then skipped with the reason printed, never silently.

import { rm } from 'node:fs/promises';
import { AppsV1Api, CoreV1Api, KubeConfig, StorageV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { agentKubeconfig, apply, manifestObjects, startAgentProcess, type AgentProcess } from '../../localcluster/agentproc.ts';
import { controlPlaneBinaries, newWorkDir, startControlPlane, type ControlPlane } from '../../localcluster/controlplane/controlplane.ts';
import { tailLogs } from '../../localcluster/controlplane/logs.ts';
import { podExec } from '../../localcluster/exec.ts';
import { missingForRealNode, nodeBinaries, startRealNode, type RealNode } from '../../localcluster/node/realnode.ts';
import { waitFor } from '../../localcluster/wait.ts';

export { IMAGES } from '../../localcluster/node/realnode.ts';

/** Why this machine cannot run a real node, or '' when it can. */
export const REAL_NODE_MISSING = missingForRealNode().join(', ');
if (REAL_NODE_MISSING) console.warn(`real-node tests SKIPPED: this machine lacks ${REAL_NODE_MISSING} (CI installs and runs them)`);

export interface RealNodeE2E {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  cp: ControlPlane;
  node: RealNode;
  agent: AgentProcess;
  ns: string;
  /** Runs `command` in the pod's container; stdout, or a rejection with stderr and the exit status. */
  exec(pod: V1Pod, command: string[], container?: string): Promise<string>;
  /** Starts a new agent process (after the old one was stopped or killed). */
  restartAgent(): Promise<AgentProcess>;
  waitFor<T>(fn: () => T | Promise<T>, describe: string, timeoutMs?: number): Promise<NonNullable<T>>;
}

export function useRealNode(prefix: string, opts: { agentArgs?: (node: RealNode) => string[] } = {}): RealNodeE2E {
  const e = {} as RealNodeE2E;
  const diagnostics = async () => [
    await e.agent?.report(),
    e.node ? tailLogs(e.node.logsDir, 30) : '',
    e.cp ? tailLogs(e.cp.logsDir, 15) : '',
  ].join('\n');
  e.waitFor = (fn, describe, timeoutMs = 60_000) => waitFor(fn, { timeoutMs, intervalMs: 100, describe, diagnostics });
  beforeAll(async () => {
    if (REAL_NODE_MISSING) return;
    e.cp = await startControlPlane({ binDir: await controlPlaneBinaries(), workDir: await newWorkDir(), realNodes: true });
    e.kc = new KubeConfig();
    e.kc.loadFromFile(e.cp.kubeconfigPath);
    e.core = e.kc.makeApiClient(CoreV1Api);
    e.apps = e.kc.makeApiClient(AppsV1Api);
    e.node = await startRealNode({ cp: e.cp, name: `${prefix}-node`, binDir: await nodeBinaries() });
    // The CSIDriver too (the kubelet looks it up on every publish); not the DaemonSet.
    await apply(e.kc, manifestObjects().filter((o) => o.kind === 'CSIDriver'));
    await e.kc.makeApiClient(StorageV1Api).readCSIDriver({ name: 'ownerrefs.dev' });
    e.ns = `${prefix}-test`;
    await e.core.createNamespace({ body: { metadata: { name: e.ns } } });
    await e.waitFor(() => e.core.readNamespacedServiceAccount({ name: 'default', namespace: e.ns }), 'the default ServiceAccount');
    const agentKc = await agentKubeconfig(e.kc, e.node.workDir);
    e.restartAgent = async () => {
      e.agent = await startAgentProcess({ kubeconfig: agentKc, nodeName: e.node.name, kubeletRoot: e.node.kubeletRoot, args: opts.agentArgs?.(e.node) ?? [] });
      await e.waitFor(async () => (await e.agent.get('/readyz')).status === 200, 'agent ready');
      return e.agent;
    };
    await e.restartAgent();
    const exec = podExec(e.kc);
    e.exec = (pod, command, container) =>
      exec({ namespace: pod.metadata!.namespace!, name: pod.metadata!.name!, container: container ?? pod.spec!.containers[0]!.name }, command);
  }, 600_000);
  beforeEach((ctx) => {
    ctx.onTestFailed(async ({ task }) => console.error(`=== diagnostics for "${task.name}" ===\n${await diagnostics()}`));
  });
  afterAll(async () => {
    const code = await e.agent?.stop();
    await e.node?.stop();
    await e.cp?.stop();
    if (e.cp) await rm(e.cp.workDir, { recursive: true, force: true });
    if (code !== undefined && code !== 0) throw new Error(`agent exited ${code} on SIGTERM`);
  }, 300_000);
  return e;
}
