// Several nodes, one agent each (issue 14): kubemark's hollow kubelets (real kubelet code,
// fake runtime) make real volume directories on three nodes of one control plane; each
// agent serves its own node's pods and only those, and one agent's death costs only its
// own node.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { AppsV1Api, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from '../../localcluster/agentproc.ts';
import { startHollowFleet, startLocalControlPlane, type HollowFleet, type LocalControlPlane } from '../../localcluster/clusters.ts';
import type { ControlPlane } from '../../localcluster/controlplane/controlplane.ts';
import { tailLogs } from '../../localcluster/controlplane/logs.ts';
import type { HollowNode } from '../../localcluster/node/hollow.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { podinfoDaemonSet } from '../../localcluster/workloads.ts';
import { items } from '../support/e2e.ts';

const NODES = 3;

describe('three hollow nodes, one agent each', () => {
  let lcp: LocalControlPlane | undefined;
  let fleet: HollowFleet | undefined;
  let cp: ControlPlane;
  let core: CoreV1Api;
  const nodes: HollowNode[] = [];
  const agents: AgentProcess[] = [];
  const ns = 'multi';
  const diagnostics = async () => [...await Promise.all(agents.map((a) => a.report())), ...nodes.map((n) => tailLogs(n.logsDir, 10)), tailLogs(cp.logsDir, 10)].join('\n');
  const wait = <T>(fn: () => T | Promise<T>, describe: string) => waitFor(fn, { timeoutMs: 90_000, intervalMs: 200, describe, diagnostics });

  beforeAll(async () => {
    lcp = await startLocalControlPlane({ realNodes: true });
    const { kc } = lcp;
    cp = lcp.cp;
    core = lcp.core;
    fleet = await startHollowFleet({ cp, count: NODES });
    nodes.push(...fleet.nodes);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    for (const n of nodes) {
      const a = await startAgentProcess({ kubeconfig: await agentKubeconfig(kc, n.kubeletRoot, { nodeName: n.name }), nodeName: n.name, kubeletRoot: n.kubeletRoot });
      agents.push(a);
    }
    await wait(async () => (await Promise.all(agents.map(async (a) => (await a.get('/readyz')).status))).every((s) => s === 200), 'every agent ready');
    await wait(() => core.readNamespacedServiceAccount({ name: 'default', namespace: ns }), 'the default ServiceAccount');
    await kc.makeApiClient(AppsV1Api).createNamespacedDaemonSet({ namespace: ns, body: podinfoDaemonSet('podinfo') });
  }, 600_000);
  beforeEach((ctx) => {
    ctx.onTestFailed(async ({ task }) => console.error(`=== diagnostics for "${task.name}" ===\n${await diagnostics()}`));
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await fleet?.stop();
    await lcp?.stop();
  }, 300_000);

  const podOn = async (node: string): Promise<V1Pod | undefined> =>
    (await core.listNamespacedPod({ namespace: ns, fieldSelector: `spec.nodeName=${node}` })).items.find((p) => p.status?.phase === 'Running');
  const fileOf = (n: HollowNode, pod: V1Pod) => path.join(n.kubeletRoot, 'pods', pod.metadata!.uid!, 'volumes', 'kubernetes.io~empty-dir', 'podinfo', 'ownerReferences');
  const read = (n: HollowNode, pod: V1Pod) => (existsSync(fileOf(n, pod)) ? readFileSync(fileOf(n, pod), 'utf8') : undefined);

  it('each agent writes its own node\'s pod, and only that one', async () => {
    const pods = await wait(async () => {
      const p = await Promise.all(nodes.map((n) => podOn(n.name)));
      return p.every(Boolean) ? p as V1Pod[] : undefined;
    }, 'a Running DaemonSet pod on every node');
    for (const [i, n] of nodes.entries()) {
      await wait(() => read(n, pods[i]!)?.includes('"kind":"DaemonSet"'), `${n.name}: the file names the DaemonSet`);
    }
    for (const a of agents) expect(await a.metric('ownerrefs_pods_tracked')).toBe(1);
    // Each agent's writes land only under its own node's root.
    for (const [i, n] of nodes.entries()) {
      for (const [j, other] of pods.entries()) if (j !== i) expect(existsSync(path.join(n.kubeletRoot, 'pods', other.metadata!.uid!))).toBe(false);
    }
  });

  it('killing one agent leaves the others serving; its own node keeps its last files', async () => {
    const pods = await Promise.all(nodes.map(async (n) => (await podOn(n.name))!));
    const before = read(nodes[0]!, pods[0]!);
    await agents[0]!.stop('SIGKILL');
    // Orphan every pod: the two live agents follow, the dead one's file stays as it was.
    for (const p of pods) {
      await core.patchNamespacedPod({ name: p.metadata!.name!, namespace: ns, body: { metadata: { labels: { app: 'orphaned' } } } }, mergePatch);
    }
    for (const [i, n] of nodes.entries()) {
      if (i === 0) continue;
      await wait(() => { const t = read(n, pods[i]!); return t !== undefined && items(t).length === 0; }, `${n.name}: orphaned`);
    }
    expect(read(nodes[0]!, pods[0]!)).toBe(before);
  });
});
