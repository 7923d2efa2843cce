// `npm run bench:fleet`: what the agents cost the API server across many nodes (issue 19).
// K hollow nodes (kubemark's hollow kubelet: real kubelet code, fake runtime) on one real
// control plane, P opted-in pods per node (a DaemonSet and a Deployment), one agent per
// node as its own process (compiled, as the image runs it), measured side by side in one run:
//   1. the control plane alone (open watches), then the kubelets alone for a window: the
//      API server's CPU seconds and RSS, its open watches and the requests it dispatched per
//      FlowSchema (kubelets: system-node*; agents: a FlowSchema of their own);
//   2. the same window with the agents added; per node, the agent's share against the kubelet's;
//   3. a rolling update of the Deployment and the DaemonSet: every file must come to name
//      its pod's new controller (and, with --follow-owners, the owner reads it cost);
//      then propagation on several nodes at once against a bare watch of each (owner
//      changes on existing pods, each file timed by its ctime: support/fleet/propagation.ts);
//   4. the reconnect storm: the API server restarted with every agent connected
//      (support/fleet/storm.ts);
//   5. what one more watch costs the API server: --watch-cost watches like an agent's opened
//      at once, its RSS and CPU with and without them.
// Kubelet roots are on tmpfs, as the pods' `medium: Memory` volumes are on a real node.
// Results: bench/results/fleet.json and fleet.svg (against fleet-before-pacer.json).
//
//   npm run bench:fleet -- [--nodes=50] [--pods=5] [--window=30] [--probe-nodes=5] [--rounds=10]
//                          [--follow-owners] [--watch-cost=1000] [--out=bench/results/fleet.json]
//                          [--no-quiet-probe]   (propagation as an inotify probe sees it)

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { KubeApiClient } from '../agent/kube/client.ts';
import { KubeCredentials } from '../agent/kube/kubeconfig.ts';
import { agentKubeconfig, apply, startAgentProcess, type AgentProcess } from '../localcluster/agentproc.ts';
import { startHollowFleet, startLocalControlPlane, type HollowFleet } from '../localcluster/clusters.ts';
import type { HollowNode } from '../localcluster/node/hollow.ts';
import { waitFor } from '../localcluster/wait.ts';
import { podinfoDaemonSet } from '../localcluster/workloads.ts';
import { buildAgent } from './support/agent.ts';
import { createAgentFlowSchema, MERGE } from './support/cluster.ts';
import { apiServer, describeWindow, measureWindow, watchCost, type WatchCost, type Window } from './support/fleet/apiserver.ts';
import { renderFleetChart, type FleetChartInput } from './support/fleet/chart.ts';
import { propagationOnNodes } from './support/fleet/propagation.ts';
import { describeStorm, reconnectStorm } from './support/fleet/storm.ts';
import { gitState, loadavg, machine } from './support/machine.ts';
import { sample } from './support/proc.ts';
import { round } from './support/stats.ts';

const { values: flags } = parseArgs({
  options: {
    nodes: { type: 'string', default: '50' }, pods: { type: 'string', default: '5' }, window: { type: 'string', default: '30' },
    'probe-nodes': { type: 'string', default: '5' }, rounds: { type: 'string', default: '10' },
    'follow-owners': { type: 'boolean', default: false }, 'watch-cost': { type: 'string', default: '1000' }, out: { type: 'string' },
    // Propagation by each file's ctime, with no watch during the rounds (bench/probes/files.ts);
    // --no-quiet-probe: the inotify probe of the runs before 2026-11-26.
    'quiet-probe': { type: 'boolean', default: true },
  },
  allowNegative: true,
});
const K = Number(flags.nodes);
const P = Number(flags.pods);
const WINDOW_S = Number(flags.window);
const ROOT = path.join(import.meta.dirname, '..');
const OUT = flags.out ?? path.join(ROOT, 'bench', 'results', 'fleet.json');
const NS = 'fleet';
const t0 = performance.now();
const say = (m: string) => process.stdout.write(`${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s  ${m}\n`);

async function main(): Promise<void> {
  const result: Record<string, unknown> = {
    command: `npm run bench:fleet -- ${process.argv.slice(2).join(' ')}`.trim(), date: new Date().toISOString(),
    machine: machine(), git: gitState(), nodes: K, podsPerNode: P, windowSeconds: WINDOW_S, followOwners: flags['follow-owners'], loadBefore: loadavg(),
  };
  const lcp = await startLocalControlPlane({ realNodes: true });
  const { cp, kc } = lcp;
  let fleet: HollowFleet | undefined;
  let nodes: readonly HollowNode[] = [];
  const agents: AgentProcess[] = [];
  const api = new KubeApiClient(KubeCredentials.fromFile(cp.kubeconfigPath) as unknown as KubeConfig);
  try {
    const controlPlaneAlone = await apiServer(cp); // before the nodes join
    fleet = await startHollowFleet({ cp, count: K, memoryRoot: true });
    nodes = fleet.nodes;
    say(`${K} hollow nodes Ready in ${(fleet.readyMs / 1000).toFixed(1)} s`);
    if (flags['follow-owners']) {
      await apply(kc, parseAllDocuments(readFileSync(path.join(ROOT, 'rbac-follow-owners.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject));
      for (const n of nodes) await api.json('PATCH', `/api/v1/nodes/${n.name}`, { metadata: { labels: { 'ownerrefs.dev/follow-owners': 'true' } } }, MERGE);
    }
    await api.json('POST', '/api/v1/namespaces', { metadata: { name: NS } });
    await waitFor(() => api.json('GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`), { timeoutMs: 60_000 });
    await api.json('POST', `/apis/apps/v1/namespaces/${NS}/daemonsets`, podinfoDaemonSet('podinfo'));
    const template = podinfoDaemonSet('web', { app: 'web' }).spec!.template;
    await api.json('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, { metadata: { name: 'web' }, spec: { replicas: K * (P - 1), selector: { matchLabels: { app: 'web' } }, template } });
    await waitFor(async () => (await runningPods()).length >= K * P ? true : undefined, { timeoutMs: 600_000, intervalMs: 1_000, describe: `${K * P} pods Running` });
    say(`${K * P} pods Running (${P} per node)`);

    const kubeletsAlone = await measureWindow(cp, WINDOW_S);
    say(`kubelets alone: ${describeWindow(kubeletsAlone)}`);
    await createAgentFlowSchema(kc);
    // Each agent's token is bound to a pod on its node, as a DaemonSet pod's is (the agent's policy checks it).
    const agentKcs = await Promise.all(nodes.map((n) => agentKubeconfig(kc, n.kubeletRoot, { nodeName: n.name })));
    const built = buildAgent(); // the compiled agent, as the image runs it
    const a0 = performance.now();
    for (const n of nodes) {
      agents.push(await startAgentProcess({ kubeconfig: agentKcs[nodes.indexOf(n)]!, nodeName: n.name, kubeletRoot: n.kubeletRoot, args: ['--log-level=info'], main: built.main, env: { NODE_ENV: 'production' } }));
    }
    await waitFor(async () => (await sumOver(agents, 'ownerrefs_volumes_tracked')) >= K * P ? true : undefined,
      { timeoutMs: 300_000, intervalMs: 1_000, describe: 'every agent tracks its node\'s pods' });
    say(`${K} agents started and tracking ${K * P} volumes in ${((performance.now() - a0) / 1000).toFixed(1)} s`);
    const withAgents = await measureWindow(cp, WINDOW_S);
    say(`kubelets + agents: ${describeWindow(withAgents)}`);
    result.controlPlaneAloneWatches = controlPlaneAlone.watches;
    result.kubeletsAlone = kubeletsAlone;
    result.withAgents = withAgents;
    result.perNode = perNode(controlPlaneAlone.watches, kubeletsAlone, withAgents);
    const agentRss = agents.map((a) => sample(a.child.pid!).rssMiB);
    const hollowRss = nodes.map((n) => n.pid).filter((p): p is number => p !== undefined).map((p) => sample(p).rssMiB);
    result.agentRssMiB = { mean: round(mean(agentRss), 1), max: round(Math.max(...agentRss), 1) };
    result.hollowKubeletRssMiB = { mean: round(mean(hollowRss), 1), max: round(Math.max(...hollowRss), 1) };
    say(`per node: ${JSON.stringify(result.perNode)}; agent RSS ${(result.agentRssMiB as { mean: number }).mean} MiB, hollow kubelet ${(result.hollowKubeletRssMiB as { mean: number }).mean} MiB`);

    result.churn = await rollout();

    const probeNodes = nodes.slice(0, Math.min(K, Number(flags['probe-nodes'])));
    const prop = await propagationOnNodes({ api, kubeconfig: cp.kubeconfigPath, namespace: NS, rounds: Number(flags.rounds), nodes: probeNodes.map((n) => ({ name: n.name, kubeletRoot: n.kubeletRoot })), quiet: flags['quiet-probe'] });
    result.propagation = prop;
    say(`propagation on ${prop.nodes} nodes at once (${prop.events} owner changes): agent p50 ${prop.agentMs.p50} p99 ${prop.agentMs.p99} ms, ` +
      `floor p50 ${prop.floorMs.p50} p99 ${prop.floorMs.p99} ms (${prop.ratioP99}x); per-node p99 ratio ${prop.perNodeRatioP99.min}-${prop.perNodeRatioP99.max}x (median ${prop.perNodeRatioP99.median}x)`);

    const storm = await reconnectStorm(cp, agents);
    result.reconnect = storm;
    say(describeStorm(storm));

    // What one more watch like an agent's costs the API server, at a scale where it shows:
    // as the agent holds them (a connection each), and two to an HTTP/2 connection.
    const cost: WatchCost[] = [];
    for (const protocol of Number(flags['watch-cost']) > 0 ? ['http1', 'http2'] as const : []) {
      // Each on a freshly started API server: Go frees the memory of closed watches only at
      // its next GC, which a heap this size may not reach for minutes.
      await cp.restartApiserver();
      await waitFor(async () => ((await apiServer(cp).catch(() => undefined))?.podAndNodeWatches ?? 0) >= storm.podAndNodeWatchesBefore ? true : undefined,
        { timeoutMs: 180_000, intervalMs: 1_000, describe: 'every pod and Node watch back after the restart' });
      await new Promise((r) => setTimeout(r, 10_000));
      const wc = await watchCost(cp, nodes.map((n) => n.name), Number(flags['watch-cost']), protocol);
      cost.push(wc);
      say(`${wc.watches} more node-scoped pod watches (${protocol}): API server RSS ${wc.rssMiBBefore} -> ${wc.rssMiBWith} MiB (${wc.perWatchKiB} KiB per watch), ` +
        `Go heap+stacks in use ${wc.goInUseMiBBefore} -> ${wc.goInUseMiBWith} MiB (${wc.goPerWatchKiB} KiB, ${wc.goroutinesPerWatch} goroutines per watch), ` +
        `CPU ${wc.cpuPerSecondBefore} -> ${wc.cpuPerSecondWith} CPU-s/s`);
    }
    result.watchCost = cost;
    result.loadAfter = loadavg();
    mkdirSync(path.dirname(OUT), { recursive: true });
    writeFileSync(OUT, JSON.stringify(result, null, 2) + '\n');
    const baselineFile = path.join(ROOT, 'bench', 'results', 'fleet-before-pacer.json');
    const baseline = existsSync(baselineFile) ? JSON.parse(readFileSync(baselineFile, 'utf8')) as FleetChartInput : undefined;
    const chart = OUT.replace(/\.json$/, '.svg');
    writeFileSync(chart, renderFleetChart(result as unknown as FleetChartInput, baseline));
    say(`wrote ${path.relative(process.cwd(), OUT)} and ${path.relative(process.cwd(), chart)}`);
    if (storm.everyWatchBackAfterSeconds === undefined) throw new Error('the pod and Node watches were not all back within 120 s of the restart');
  } finally {
    api.close();
    for (const a of agents) await a.stop().catch(() => undefined);
    await fleet?.stop().catch(() => undefined);
    await lcp.stop();
  }

  async function runningPods() {
    const list = await api.json<{ items: Pod[] }>('GET', `/api/v1/namespaces/${NS}/pods`);
    return list.items.filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp);
  }

  /** A rolling update of the Deployment and the DaemonSet; done when every new pod's file names its controller. */
  async function rollout(): Promise<Record<string, unknown>> {
    const reads0 = await sumOver(agents, 'ownerrefs_owner_reads_total');
    const c0 = performance.now();
    const bump = { spec: { template: { metadata: { annotations: { 'fleet.ownerrefs.dev/rollout': String(Date.now()) } } } } };
    await api.json('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/web`, bump, MERGE);
    await api.json('PATCH', `/apis/apps/v1/namespaces/${NS}/daemonsets/podinfo`, { spec: { ...bump.spec, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '100%' } } } }, MERGE);
    const rootOf = new Map(nodes.map((n) => [n.name, n.kubeletRoot]));
    const converged = await waitFor(async () => {
      const pods = await runningPods();
      const wrong = pods.filter((p) => {
        const owner = p.metadata.ownerReferences?.find((o) => o.controller)?.uid;
        const file = path.join(rootOf.get(p.spec.nodeName ?? '') ?? '', 'pods', p.metadata.uid, 'volumes', 'kubernetes.io~empty-dir', 'podinfo', 'ownerReferences');
        return !owner || !existsSync(file) || !readFileSync(file, 'utf8').includes(owner);
      });
      type Status = { metadata: { generation?: number }; status?: { observedGeneration?: number; updatedReplicas?: number; replicas?: number; updatedNumberScheduled?: number; numberAvailable?: number } };
      const d = await api.json<Status>('GET', `/apis/apps/v1/namespaces/${NS}/deployments/web`);
      const ds = await api.json<Status>('GET', `/apis/apps/v1/namespaces/${NS}/daemonsets/podinfo`);
      // The controllers' status describes the new generation, not the one before the patch.
      const seen = (o: Status) => (o.status?.observedGeneration ?? 0) >= (o.metadata.generation ?? 1);
      const rolled = seen(d) && seen(ds) && d.status?.updatedReplicas === K * (P - 1) && d.status?.replicas === K * (P - 1) &&
        ds.status?.updatedNumberScheduled === K && ds.status?.numberAvailable === K;
      return rolled && pods.length >= K * P && wrong.length === 0 ? pods.length : undefined;
    }, { timeoutMs: 600_000, intervalMs: 1_000, describe: 'the rollout done and every file naming its pod\'s current controller' });
    const seconds = (performance.now() - c0) / 1000;
    const ownerReads = (await sumOver(agents, 'ownerrefs_owner_reads_total')) - reads0;
    say(`rollout of ${converged} pods: every file names its pod's controller after ${seconds.toFixed(1)} s` +
      (flags['follow-owners'] ? `; the agents read ${ownerReads} owners (${(ownerReads / K).toFixed(2)} per node)` : ''));
    return { rolloutConvergedSeconds: round(seconds, 1), pods: converged, ownerReads, ownerReadsPerNode: round(ownerReads / K, 2) };
  }
}

interface Pod {
  metadata: { uid: string; deletionTimestamp?: string; ownerReferences?: { uid: string; controller?: boolean }[] };
  spec: { nodeName?: string };
  status?: { phase?: string };
}

/** Per node: the agent's share of the API server's watches and requests against the kubelet's. */
function perNode(controlPlaneWatches: number, alone: Window, withAgents: Window) {
  return {
    kubeletWatches: round((alone.openWatches - controlPlaneWatches) / K, 2),
    agentWatches: round((withAgents.openWatches - alone.openWatches) / K, 2),
    kubeletRequestsPerSecond: round(alone.requestsPerSecond.kubelets / K, 3),
    agentRequestsPerSecond: round(withAgents.requestsPerSecond.agents / K, 3),
  };
}

async function sumOver(agents: AgentProcess[], metric: string): Promise<number> {
  return (await Promise.all(agents.map((a) => a.metric(metric).catch(() => 0)))).reduce((x, y) => x + y, 0);
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench:fleet failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
