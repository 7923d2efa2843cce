// `npm run bench:storm`: a fleet-wide ownership storm against the API server's other clients.
// K hollow nodes (kubemark's hollow kubelet) on one real control plane, P pods per node that
// read the owner-references annotation (the KEP's syntax as the webhook stores it), one agent
// per node (compiled, as the image runs it, with daemonset.yaml's RBAC, policy and token).
// A "controller" (a ServiceAccount in kube-system, as the real controllers are: APF's
// workload-high) orphans every pod at once, then adopts them again (C PATCHes in flight:
// what the garbage collector does to the pods of a ReplicaSet deleted with --cascade=orphan,
// and a controller re-adopting them). Meanwhile a bystander client (support/storm/bystander.ts)
// reads and writes ConfigMaps at a steady rate. Each pass runs the same storm in three arms:
//   none          no agents (stopped): what the storm costs the cluster by itself;
//   workload-low  the agents, their writes where a ServiceAccount's fall by default;
//   own-level     the agents with daemonset.yaml's FlowSchema and PriorityLevelConfiguration
//                 (--shares overrides its nominalConcurrencyShares; an arm own-level:N, to N).
// Each arm: a quiet window (no storm), then the orphaning and the adoption, each until every
// pod's annotation is right (support/storm/tracker.ts). Reported per arm and phase: time until
// right (p50, p99, last) from the storm's start, the controller's own time, the API server's
// PATCH rate and latency and APF's per-level numbers (support/storm/apimetrics.ts), the
// bystander's latency quiet and during the storm, the agents' CPU and RSS. Passes rotate the
// arms' order. Kubelet roots on tmpfs. Results: bench/results/storm.json.
//
// On a cluster the nodes have CPUs of their own; here 50 hollow kubelets and 50 agents share two
// cores with the API server, and take most of them. --node-cpu-shares=128 (root) puts the node
// side in a cgroup weighted 1/8 of the rest (support/cpugroup.ts), so the API server gets the
// CPU it would have and its numbers are its own, not the node side's contention.
//
//   npm run bench:storm -- [--nodes=50] [--pods=100] [--passes=3] [--arms=none,workload-low,own-level]
//                          [--shares=N] [--concurrency=16] [--bystander-rate=20] [--quiet=15]
//                          [--node-cpu-shares=128] [--out=...]

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { KubeApiClient } from '../agent/kube/client.ts';
import { KubeCredentials } from '../agent/kube/kubeconfig.ts';
import { agentKubeconfig, apply, manifestObjects, serviceAccountKubeconfig, startAgentProcess, type AgentProcess } from '../localcluster/agentproc.ts';
import { startHollowFleet, startLocalControlPlane, type HollowFleet } from '../localcluster/clusters.ts';
import type { HollowNode } from '../localcluster/node/hollow.ts';
import { waitFor } from '../localcluster/wait.ts';
import { TMP, buildAgent } from './support/agent.ts';
import { CpuGroup } from './support/cpugroup.ts';
import { gitState, loadavg, machine } from './support/machine.ts';
import { sample } from './support/proc.ts';
import { dist, nowMs, pool, round } from './support/stats.ts';
import { apiWindow, nominalSeats, scrape } from './support/storm/apimetrics.ts';
import { startBystander } from './support/storm/bystander.ts';
import { OWNERS_ANNOTATION, startTracker } from './support/storm/tracker.ts';

const { values: flags } = parseArgs({ options: {
  nodes: { type: 'string', default: '50' }, pods: { type: 'string', default: '100' }, passes: { type: 'string', default: '3' },
  arms: { type: 'string', default: 'none,workload-low,own-level' }, shares: { type: 'string' },
  concurrency: { type: 'string', default: '16' }, 'bystander-rate': { type: 'string', default: '20' }, quiet: { type: 'string', default: '15' },
  out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'storm.json') },
  // The node side's CPU weight against the control plane's and the clients' 1024 (0: unweighted).
  'node-cpu-shares': { type: 'string', default: '0' },
} });
const K = Number(flags.nodes);
const P = Number(flags.pods);
const C = Number(flags.concurrency);
/** An arm; `own-level:N` is the shipped level with N nominalConcurrencyShares (default --shares, else daemonset.yaml's). */
type Arm = 'none' | 'workload-low' | `own-level${'' | `:${number}`}`;
const ARMS = flags.arms.split(',') as Arm[];
for (const a of ARMS) if (!/^(none|workload-low|own-level(:\d+)?)$/.test(a)) throw new Error(`--arms: none, workload-low, own-level or own-level:N, not ${a}`);
const NS = 'storm';
const BYSTANDER_NS = 'bystander';
const LEVELS = ['ownerrefs-agent-writes', 'workload-low', 'workload-high', 'global-default', 'system', 'node-high'];
const t0 = performance.now();
const say = (m: string) => process.stdout.write(`${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s  ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The API Priority and Fairness objects daemonset.yaml ships, the share overridden by --shares. */
function apfObjects(shares = flags.shares): KubernetesObject[] {
  const objs = manifestObjects().filter((o) => o.kind === 'FlowSchema' || o.kind === 'PriorityLevelConfiguration');
  if (objs.length !== 2) throw new Error('daemonset.yaml has no FlowSchema and PriorityLevelConfiguration for the agents');
  const level = objs.find((o) => o.kind === 'PriorityLevelConfiguration') as KubernetesObject & { spec: { limited: { nominalConcurrencyShares: number } } };
  if (shares) level.spec.limited.nominalConcurrencyShares = Number(shares);
  return objs;
}

async function main(): Promise<void> {
  const result: Record<string, unknown> = {
    command: `npm run bench:storm -- ${process.argv.slice(2).join(' ')}`.trim(), date: new Date().toISOString(), machine: machine(), git: gitState(),
    nodes: K, podsPerNode: P, pods: K * P, concurrency: C, bystanderRate: Number(flags['bystander-rate']), loadBefore: loadavg(),
  };
  const lcp = await startLocalControlPlane({ realNodes: true });
  const { cp, kc } = lcp;
  let fleet: HollowFleet | undefined;
  let nodes: readonly HollowNode[] = [];
  let agents: AgentProcess[] = [];
  const admin = new KubeApiClient(KubeCredentials.fromFile(cp.kubeconfigPath) as unknown as KubeConfig);
  const workDir = path.join(TMP, `storm-${process.pid}`);
  mkdirSync(workDir, { recursive: true });
  const closers: (() => unknown)[] = [];
  const shares = Number(flags['node-cpu-shares']);
  const nodeSide = shares > 0 ? CpuGroup.create(`ownerrefs-bench-storm-${process.pid}`, shares) : undefined;
  result.nodeCpuShares = shares || undefined;
  try {
    fleet = await startHollowFleet({ cp, count: K, memoryRoot: true });
    nodes = fleet.nodes;
    say(`${K} hollow nodes Ready in ${(fleet.readyMs / 1000).toFixed(1)} s`);
    for (const n of nodes) if (n.pid) nodeSide?.add(n.pid);
    const agentKcs = await Promise.all(nodes.map((n) => agentKubeconfig(kc, n.kubeletRoot, { nodeName: n.name }))); // applies daemonset.yaml's objects
    for (const ns of [NS, BYSTANDER_NS]) await admin.json('POST', '/api/v1/namespaces', { metadata: { name: ns } });
    const controllerKc = await clientOf('kube-system', 'storm-controller', [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'patch', 'delete'] }], true);
    const bystanderKc = new KubeConfig();
    bystanderKc.loadFromFile(await clientOf(BYSTANDER_NS, 'bystander', [{ apiGroups: [''], resources: ['configmaps'], verbs: ['*'] }], false));
    const owner = await admin.json<{ metadata: { uid: string } }>('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: 'owner' } });
    const ownerRef = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata.uid, controller: true };

    // The pods, as the webhook stores the KEP's syntax: env from the annotation, which the
    // agents set when they first see them.
    const names = nodes.flatMap((n, i) => Array.from({ length: P }, (_, j) => ({ node: n.name, name: `p-${i}-${j}` })));
    const creators = Array.from({ length: 4 }, () => new KubeApiClient(KubeCredentials.fromFile(cp.kubeconfigPath) as unknown as KubeConfig));
    closers.push(() => creators.forEach((c) => c.close()));
    const c0 = performance.now();
    await pool(names, 32, (p, i) => creators[i % creators.length]!.json('POST', `/api/v1/namespaces/${NS}/pods`, { metadata: { name: p.name, ownerReferences: [ownerRef] },
      spec: { nodeName: p.node, terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'busybox',
        env: [{ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${OWNERS_ANNOTATION}']` } } }] }] } }));
    say(`${names.length} pods created in ${((performance.now() - c0) / 1000).toFixed(1)} s`);
    const tracker = await startTracker(admin, NS);
    closers.push(() => tracker.stop());

    const built = buildAgent();
    const startAgents = async () => {
      const a0 = performance.now();
      agents = await Promise.all(nodes.map((n, i) => startAgentProcess({ kubeconfig: agentKcs[i]!, nodeName: n.name, kubeletRoot: n.kubeletRoot, main: built.main,
        logLevel: 'info', env: { NODE_ENV: 'production' }, startTimeoutMs: 300_000 })));
      for (const a of agents) nodeSide?.add(a.pid);
      tracker.expect([owner.metadata.uid]);
      await waitFor(() => tracker.pending() === 0 || undefined, { timeoutMs: 900_000, intervalMs: 1_000, describe: 'every annotation set after the agents start' });
      say(`${K} agents up, every annotation right, in ${((performance.now() - a0) / 1000).toFixed(1)} s`);
    };
    const stopAgents = async () => { await Promise.all(agents.map((a) => a.stop())); agents = []; };
    closers.push(() => stopAgents());
    await startAgents(); // the pods' annotations set once, before any arm
    const bystander = await startBystander(bystanderKc, BYSTANDER_NS, Number(flags['bystander-rate']));
    closers.push(() => bystander.stop());
    result.nominalSeats = nominalSeats(await scrape(cp));

    const arms: Record<string, unknown>[] = [];
    for (let pass = 0; pass < Number(flags.passes); pass++) {
      const order = ARMS.map((_, i) => ARMS[(i + pass) % ARMS.length]!);
      for (const arm of order) {
        if (arm === 'none' && agents.length) await stopAgents();
        if (arm !== 'none' && !agents.length) await startAgents();
        if (arm.startsWith('own-level')) await apply(kc, apfObjects(arm.split(':')[1]));
        if (arm === 'workload-low') await KubernetesObjectApi.makeApiClient(kc).delete(apfObjects().find((o) => o.kind === 'FlowSchema')!).catch(() => undefined);
        await sleep(3_000); // APF takes a new FlowSchema within a second or two
        const q0 = nowMs();
        await sleep(Number(flags.quiet) * 1000);
        const quiet = bystander.between(q0, nowMs());
        const phases: Record<string, unknown> = {};
        for (const [phase, owners] of [['orphan', []], ['adopt', [ownerRef]]] as const) phases[phase] = await storm(arm, phase, owners);
        const row = { pass, arm, bystanderQuiet: summary(quiet), ...phases };
        arms.push(row);
        say(`pass ${pass} ${arm}: bystander quiet p50 ${row.bystanderQuiet.p50} p99 ${row.bystanderQuiet.p99} ms`);
      }
    }
    result.arms = arms;
    result.agentRssMiB = agents.length ? rss() : undefined;
    result.loadAfter = loadavg();
    mkdirSync(path.dirname(flags.out), { recursive: true });
    writeFileSync(flags.out, JSON.stringify(result, null, 2) + '\n');
    say(`wrote ${path.relative(process.cwd(), flags.out)}`);

    /** One storm: every pod's owners set to `owners` by the controller, C PATCHes in flight. */
    async function storm(arm: Arm, phase: string, owners: readonly { uid: string }[]) {
      const a = await scrape(cp);
      const cpu0 = agents.map((x) => sample(x.pid).cpuS);
      const writes0 = await sumOver('ownerrefs_annotation_writes_total');
      tracker.expect(owners.map((o) => o.uid));
      const s0 = nowMs();
      const body = { metadata: { ownerReferences: owners.length ? owners : null } };
      const clients = Array.from({ length: Math.ceil(C / 8) }, () => new KubeApiClient(KubeCredentials.fromFile(controllerKc) as unknown as KubeConfig));
      await pool(names, C, (p, i) => clients[i % clients.length]!.json('PATCH', `/api/v1/namespaces/${NS}/pods/${p.name}`, body, 'application/merge-patch+json'));
      for (const c of clients) c.close();
      const driverMs = nowMs() - s0;
      if (arm !== 'none') await waitFor(() => tracker.pending() === 0 || undefined, { timeoutMs: 900_000, intervalMs: 200, describe: `every annotation right (${arm}, ${phase})` });
      const s1 = nowMs();
      const b = await scrape(cp);
      const right = tracker.rightAt().map((t) => t - s0);
      const out = {
        controllerSeconds: round(driverMs / 1000, 2), seconds: round((s1 - s0) / 1000, 2),
        ...(arm !== 'none' ? { rightMs: { p50: dist(right).p50, p99: dist(right).p99, last: dist(right).max },
          lagMs: (({ p50, p99, max }) => ({ p50, p99, max }))(dist(tracker.lagMs())) } : {}),
        agentPatches: (await sumOver('ownerrefs_annotation_writes_total')) - writes0,
        agentCpuSeconds: round(agents.reduce((n, x, i) => n + sample(x.pid).cpuS - cpu0[i]!, 0), 2),
        api: apiWindow(a, b, (s1 - s0) / 1000, LEVELS),
        agentLevelSeats: nominalSeats(b)['ownerrefs-agent-writes'],
        bystander: summary(bystander.between(s0, s1)),
      };
      say(`pass ${arm} ${phase}: controller ${out.controllerSeconds} s, done ${out.seconds} s` + (out.rightMs && out.lagMs ? `; right p50 ${out.rightMs.p50} p99 ${out.rightMs.p99} last ${out.rightMs.last} ms (behind the owners p50 ${out.lagMs.p50} p99 ${out.lagMs.p99} ms)` : '') +
        `; PATCH pods ${out.api.podPatchesPerSecond}/s p50 ${out.api.podPatchMs.p50} p99 ${out.api.podPatchMs.p99} ms; agents' level ${JSON.stringify(out.api.levels['ownerrefs-agent-writes'])}` +
        `; bystander p50 ${out.bystander.p50} p99 ${out.bystander.p99} ms (${out.bystander.errors} errors); agents CPU ${out.agentCpuSeconds} s`);
      await sleep(3_000);
      return out;
    }
  } finally {
    for (const c of closers.reverse()) await Promise.resolve(c()).catch(() => undefined);
    admin.close();
    await fleet?.stop().catch(() => undefined);
    await lcp.stop();
    nodeSide?.remove();
  }

  /** A ServiceAccount with these rules (cluster-wide or in its namespace), and a kubeconfig holding its token. */
  async function clientOf(namespace: string, name: string, rules: object[], cluster: boolean): Promise<string> {
    const [role, binding] = cluster ? ['ClusterRole', 'ClusterRoleBinding'] : ['Role', 'RoleBinding'];
    const meta = { name: `storm-${name}`, ...(cluster ? {} : { namespace }) };
    await apply(kc, [
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: role, metadata: meta, rules },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: binding, metadata: meta, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: role, name: meta.name },
        subjects: [{ kind: 'ServiceAccount', name, namespace }] },
    ] as KubernetesObject[]);
    return serviceAccountKubeconfig(kc, { namespace, name }, path.join(workDir, `${name}.kubeconfig`));
  }

  async function sumOver(metric: string): Promise<number> {
    return (await Promise.all(agents.map((a) => a.metric(metric).catch(() => 0)))).reduce((x, y) => x + y, 0);
  }

  function rss() {
    const r = agents.map((a) => sample(a.pid).rssMiB);
    return { mean: round(r.reduce((x, y) => x + y, 0) / r.length, 1), max: round(Math.max(...r), 1) };
  }
}

function summary(answers: readonly { ms: number; ok: boolean }[]) {
  const d = dist(answers.map((a) => a.ms));
  return { n: d.n, p50: d.p50, p99: d.p99, max: d.max, errors: answers.filter((a) => !a.ok).length };
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench:storm failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
