// `npm run bench:fleet`: what the agents cost the API server across many nodes (issue 19,
// first part). K hollow nodes (kubemark's hollow kubelet: real kubelet code, fake runtime)
// on one real control plane, P opted-in pods per node (a DaemonSet and a Deployment),
// measured side by side in one run:
//   1. kubelets alone, for a window: the API server's CPU seconds and RSS, its registered
//      watchers and long-running requests, and the requests it dispatched per flow schema
//      (kubelets: system-nodes; agents: a FlowSchema of their own ServiceAccount);
//   2. the same with one agent per node added;
//   then a rolling update of the Deployment and the DaemonSet: every file must come to name
//   its pod's new controller (the agents' propagation quantiles, all nodes merged);
//   3. the reconnect storm: the API server restarted with every agent connected; the
//      agents' requests per second (their own metric), relists, and the time until every
//      agent watches pods and its Node again, beside the kubelets' requests in that window.
//
//   npm run bench:fleet -- [--nodes=30] [--pods=5] [--window=30] [--out=bench/results/fleet.json]

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { AppsV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from '../localcluster/agentproc.ts';
import { controlPlaneBinaries, newWorkDir, startControlPlane, type ControlPlane } from '../localcluster/controlplane/controlplane.ts';
import { httpCall } from '../localcluster/controlplane/net.ts';
import { startHollowNode, type HollowNode } from '../localcluster/node/hollow.ts';
import { nodeBinaries } from '../localcluster/node/realnode.ts';
import { waitFor } from '../localcluster/wait.ts';
import { podinfoDaemonSet } from '../test/support/e2e.ts';
import { buildAgent } from './support/agent.ts';
import { createAgentFlowSchema, AGENT_FLOW_SCHEMA } from './support/cluster.ts';
import { gitState, loadavg, machine } from './support/machine.ts';
import { sample } from './support/proc.ts';

const { values: flags } = parseArgs({ options: { nodes: { type: 'string' }, pods: { type: 'string' }, window: { type: 'string' }, out: { type: 'string' } } });
const K = Number(flags.nodes ?? 30);
const P = Number(flags.pods ?? 5);
const WINDOW_S = Number(flags.window ?? 30);
const OUT = flags.out ?? path.join(import.meta.dirname, 'results', 'fleet.json');
const NS = 'fleet';
const t0 = performance.now();
const say = (m: string) => process.stdout.write(`${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s  ${m}\n`);

interface ApiServerSample { cpuS: number; rssMiB: number; watches: number; podAndNodeWatches: number; dispatched: Record<string, number> }
/** The suggested FlowSchemas that match kubelets (group system:nodes): leases and node status, and the rest. */
const KUBELET_FLOW_SCHEMAS = ['system-node-high', 'system-nodes'];

async function apiServer(cp: ControlPlane): Promise<ApiServerSample> {
  const p = sample(cp.pids.apiserver!);
  const tls = { ca: cp.caPath, cert: path.join(cp.workDir, 'pki', 'admin.crt'), key: path.join(cp.workDir, 'pki', 'admin.key') };
  const text = (await httpCall(`${cp.server}/metrics`, { tls })).body;
  const sum = (name: string, filter = (_l: string) => true) => text.split('\n')
    .filter((l) => l.startsWith(`${name}{`) && filter(l)).reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const dispatched: Record<string, number> = {};
  for (const l of text.split('\n').filter((x) => x.startsWith('apiserver_flowcontrol_dispatched_requests_total{'))) {
    const fs = /flow_schema="([^"]+)"/.exec(l)?.[1] ?? '?';
    dispatched[fs] = (dispatched[fs] ?? 0) + Number(l.slice(l.lastIndexOf(' ') + 1));
  }
  const watch = (l: string) => l.includes('verb="WATCH"');
  return {
    cpuS: p.cpuS, rssMiB: p.rssMiB, watches: sum('apiserver_longrunning_requests', watch),
    podAndNodeWatches: sum('apiserver_longrunning_requests', (l) => watch(l) && /group="",resource="(pods|nodes)"/.test(l)), dispatched,
  };
}

function delta(a: ApiServerSample, b: ApiServerSample, seconds: number) {
  const perSecond = (fs: string) => ((b.dispatched[fs] ?? 0) - (a.dispatched[fs] ?? 0)) / seconds;
  return {
    apiserverCpuPerSecond: (b.cpuS - a.cpuS) / seconds,
    apiserverRssMiB: b.rssMiB,
    openWatches: b.watches,
    openPodAndNodeWatches: b.podAndNodeWatches,
    requestsPerSecond: {
      kubelets: KUBELET_FLOW_SCHEMAS.reduce((n, fs) => n + perSecond(fs), 0),
      agents: perSecond(AGENT_FLOW_SCHEMA),
      all: Object.keys(b.dispatched).reduce((n, fs) => n + perSecond(fs), 0),
    },
  };
}

async function window(cp: ControlPlane, what: string) {
  const a = await apiServer(cp);
  await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
  const b = await apiServer(cp);
  const d = delta(a, b, WINDOW_S);
  say(`${what}: API server ${d.apiserverCpuPerSecond.toFixed(3)} CPU-s/s, RSS ${d.apiserverRssMiB.toFixed(0)} MiB, ${d.openWatches} open watches ` +
    `(${d.openPodAndNodeWatches} of pods or nodes); requests/s kubelets ${d.requestsPerSecond.kubelets.toFixed(2)}, agents ${d.requestsPerSecond.agents.toFixed(2)}, all ${d.requestsPerSecond.all.toFixed(2)}`);
  return d;
}

async function main(): Promise<void> {
  const result: Record<string, unknown> = { command: `npm run bench:fleet -- ${process.argv.slice(2).join(' ')}`.trim(), date: new Date().toISOString(),
    machine: machine(), git: gitState(), nodes: K, podsPerNode: P, windowSeconds: WINDOW_S, loadBefore: loadavg() };
  const cp = await startControlPlane({ binDir: await controlPlaneBinaries(), workDir: await newWorkDir(), realNodes: true });
  const nodes: HollowNode[] = [];
  const agents: AgentProcess[] = [];
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    const bin = await nodeBinaries();
    const n0 = performance.now();
    for (let i = 0; i < K; i++) nodes.push(await startHollowNode({ cp, name: `hollow-${String(i).padStart(3, '0')}`, binDir: bin }));
    say(`${K} hollow nodes Ready in ${((performance.now() - n0) / 1000).toFixed(1)} s`);
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await waitFor(() => core.readNamespacedServiceAccount({ name: 'default', namespace: NS }), { timeoutMs: 60_000 });
    await apps.createNamespacedDaemonSet({ namespace: NS, body: podinfoDaemonSet('podinfo') });
    const template = podinfoDaemonSet('web', { app: 'web' }).spec!.template;
    await apps.createNamespacedDeployment({ namespace: NS, body: { metadata: { name: 'web' }, spec: { replicas: K * (P - 1), selector: { matchLabels: { app: 'web' } }, template } } });
    const running = async () => (await core.listNamespacedPod({ namespace: NS })).items.filter((p) => p.status?.phase === 'Running').length;
    await waitFor(async () => (await running()) >= K * P, { timeoutMs: 600_000, intervalMs: 1_000, describe: `${K * P} pods Running` });
    say(`${K * P} pods Running (${P} per node)`);

    result.kubeletsAlone = await window(cp, 'kubelets alone');

    await createAgentFlowSchema(kc);
    const agentKc = await agentKubeconfig(kc, cp.workDir);
    const built = buildAgent(); // the compiled agent, as the image runs it
    const agentEnv = { NODE_ENV: 'production' };
    const a0 = performance.now();
    for (const n of nodes) agents.push(await startAgentProcess({ kubeconfig: agentKc, nodeName: n.name, kubeletRoot: n.kubeletRoot, args: ['--log-level=info'], main: built.main, env: agentEnv }));
    await waitFor(async () => (await Promise.all(agents.map((a) => a.metric('ownerrefs_volumes_tracked')))).reduce((x, y) => x + y, 0) >= K * P,
      { timeoutMs: 300_000, intervalMs: 1_000, describe: 'every agent tracks its node\'s pods' });
    say(`${K} agents started and tracking ${K * P} volumes in ${((performance.now() - a0) / 1000).toFixed(1)} s`);
    result.withAgents = await window(cp, 'kubelets + agents');
    const agentRss = agents.map((a) => sample(a.child.pid!).rssMiB);
    const hollowRssMiB = nodes.map((n) => n.pid).filter((p): p is number => p !== undefined).map((p) => sample(p).rssMiB);
    result.agentRssMiB = { mean: mean(agentRss), max: Math.max(...agentRss) };
    result.hollowKubeletRssMiB = { mean: mean(hollowRssMiB), max: Math.max(...hollowRssMiB) };

    // Churn: a rolling update of the Deployment and the DaemonSet while the agents run. Every
    // pod's file on its node must come to name its current controller.
    const c0 = performance.now();
    const bump = { spec: { template: { metadata: { annotations: { 'fleet.ownerrefs.dev/rollout': String(Date.now()) } } } } };
    await apps.patchNamespacedDeployment({ name: 'web', namespace: NS, body: bump }, MERGE_PATCH);
    await apps.patchNamespacedDaemonSet({ name: 'podinfo', namespace: NS, body: { ...bump, spec: { ...bump.spec, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '100%' } } } } }, MERGE_PATCH);
    const rootOf = new Map(nodes.map((n) => [n.name, n.kubeletRoot]));
    const behind = async () => {
      const pods = (await core.listNamespacedPod({ namespace: NS })).items.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp);
      const wrong = pods.filter((p) => {
        const owner = p.metadata?.ownerReferences?.find((o) => o.controller)?.uid;
        const file = path.join(rootOf.get(p.spec!.nodeName!) ?? '', 'pods', p.metadata!.uid!, 'volumes', 'kubernetes.io~empty-dir', 'podinfo', 'ownerReferences');
        return !owner || !existsSync(file) || !readFileSync(file, 'utf8').includes(owner);
      });
      return { pods: pods.length, wrong: wrong.length };
    };
    const converged = await waitFor(async () => {
      const b = await behind();
      const rolled = (await apps.readNamespacedDeployment({ name: 'web', namespace: NS })).status?.updatedReplicas === K * (P - 1) &&
        (await apps.readNamespacedDaemonSet({ name: 'podinfo', namespace: NS })).status?.updatedNumberScheduled === K;
      return rolled && b.pods >= K * P && b.wrong === 0 ? b : undefined;
    }, { timeoutMs: 600_000, intervalMs: 1_000, describe: 'the rollout done and every file naming its pod\'s current controller' });
    const latency = await propagationQuantiles(agents);
    result.churn = { rolloutConvergedSeconds: (performance.now() - c0) / 1000, pods: converged.pods, agentPropagationSeconds: latency };
    say(`rollout of ${K * P} pods: every file names its pod's controller after ${((performance.now() - c0) / 1000).toFixed(1)} s; ` +
      `agents' propagation p50 ${fmtMs(latency.p50)}, p99 ${fmtMs(latency.p99)} (all ${K} nodes' histograms merged)`);

    // The reconnect storm.
    const total = async (name: string, labels = '') => (await Promise.all(agents.map((a) => a.metric(name, labels).catch(() => 0)))).reduce((x, y) => x + y, 0);
    // Back means: the restarted API server holds as many pod and Node watches as before (the
    // kubelets' and the agents'), counted by the server itself.
    const before = { requests: await total('ownerrefs_api_requests_total'), relists: await total('ownerrefs_relists_total'), api: await apiServer(cp) };
    const s0 = performance.now();
    let restartedAt: number | undefined;
    const restart = cp.restartApiserver().then(() => { restartedAt = (performance.now() - s0) / 1000; });
    const perSecond: number[] = []; // sampled through the outage too: the agents' metric lives in the agents
    const answeredPerSecond: number[] = []; // of those, the ones the API server answered (not refused connections)
    const errors = () => total('ownerrefs_api_requests_total', 'code="error"');
    let last = before.requests;
    let lastErrors = await errors();
    let allBackAt: number | undefined;
    for (let s = 0; s < 120 && allBackAt === undefined; s++) {
      await new Promise((r) => setTimeout(r, 1_000));
      const now = await total('ownerrefs_api_requests_total');
      const nowErrors = await errors();
      perSecond.push(now - last);
      answeredPerSecond.push(now - last - (nowErrors - lastErrors));
      last = now;
      lastErrors = nowErrors;
      const nowApi = restartedAt === undefined ? undefined : await apiServer(cp).catch(() => undefined);
      if (nowApi && nowApi.podAndNodeWatches >= before.api.podAndNodeWatches) allBackAt = (performance.now() - s0) / 1000;
    }
    await restart;
    const after = await apiServer(cp);
    result.reconnect = {
      apiserverRestartSeconds: restartedAt,
      podAndNodeWatchesBefore: before.api.podAndNodeWatches,
      everyWatchBackAfterSeconds: allBackAt,
      agentRequestsPerSecond: perSecond,
      agentRequestsPeakPerSecond: Math.max(...perSecond),
      agentAnsweredRequestsPerSecond: answeredPerSecond,
      agentAnsweredRequestsPeakPerSecond: Math.max(...answeredPerSecond),
      agentRequestsTotal: last - before.requests,
      agentRelists: (await total('ownerrefs_relists_total')) - before.relists,
      kubeletRequestsInWindow: KUBELET_FLOW_SCHEMAS.reduce((n, fs) => n + (after.dispatched[fs] ?? 0), 0), // a restarted API server counts from zero
      agentRequestsServerCounted: (after.dispatched[AGENT_FLOW_SCHEMA] ?? 0),
    };
    say(`reconnect storm: API server back in ${restartedAt?.toFixed(1)} s; all ${before.api.podAndNodeWatches} pod and Node watches back after ${allBackAt?.toFixed(1) ?? 'NOT within 120'} s; ` +
      `agent requests peak ${Math.max(...perSecond)}/s (answered by the API server: peak ${Math.max(...answeredPerSecond)}/s), total ${last - before.requests} (${agents.length} agents), relists ${(result.reconnect as { agentRelists: number }).agentRelists}; ` +
      `kubelets' requests since the restart ${(result.reconnect as { kubeletRequestsInWindow: number }).kubeletRequestsInWindow}`);
    result.loadAfter = loadavg();
    mkdirSync(path.dirname(OUT), { recursive: true });
    writeFileSync(OUT, JSON.stringify(result, null, 2) + '\n');
    say(`wrote ${path.relative(process.cwd(), OUT)}`);
    if (allBackAt === undefined) throw new Error('the pod and Node watches were not all back within 120 s of the restart');
  } finally {
    for (const a of agents) await a.stop().catch(() => undefined);
    for (const n of nodes) await n.stop().catch(() => undefined);
    await cp.stop();
    await rm(cp.workDir, { recursive: true, force: true });
  }
}

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** p50 and p99 upper bounds from the agents' ownerrefs_propagation_seconds histograms, merged. */
async function propagationQuantiles(agents: AgentProcess[]): Promise<{ p50: number; p99: number; count: number }> {
  const buckets = new Map<number, number>();
  for (const a of agents) {
    const text = (await a.get('/metrics')).body;
    for (const l of text.split('\n').filter((x) => x.startsWith('ownerrefs_propagation_seconds_bucket{'))) {
      const le = /le="([^"]+)"/.exec(l)?.[1] ?? '';
      const bound = le === '+Inf' ? Infinity : Number(le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + Number(l.slice(l.lastIndexOf(' ') + 1)));
    }
  }
  const sorted = [...buckets.entries()].sort((x, y) => x[0] - y[0]);
  const count = sorted.at(-1)?.[1] ?? 0;
  const q = (f: number) => sorted.find(([, c]) => c >= f * count)?.[0] ?? NaN;
  return { p50: q(0.5), p99: q(0.99), count };
}

function fmtMs(s: number): string {
  return Number.isFinite(s) ? `<= ${(s * 1000).toFixed(0)} ms` : 'over the top bucket';
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench:fleet failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
