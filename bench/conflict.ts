// What a 409 conflict costs an ownership change (bench/support/conflict.ts says how it is
// made and timed): the agent as it ships, its node side weighted, behind a webhook that holds
// each of its writes; each pair is a conflicting and a plain change of one pod, and the
// plain one is the floor. The bound: a conflict costs one more write (the held `--slow-ms`),
// not a backoff.
//
//   npm run bench:conflict                                    5 runs of 5 pairs, node side weighted 8192
//   npm run bench:conflict -- --runs=1 --pairs=2 --node-cpu-shares=0   (bench:conflict:smoke in CI)
//
// Results: bench/results/conflict.json (or --out).

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { startTestWebhook } from '../localcluster/testwebhook.ts';
import { waitFor } from '../localcluster/wait.ts';
import { buildAgent, startAgent } from './support/agent.ts';
import { NS, startBenchCluster } from './support/cluster.ts';
import { AGENT_USER, conflictPairs, readerPod, type ConflictPair } from './support/conflict.ts';
import { ANNOTATIONS } from '../projections/names.ts';
import { CpuGroup } from './support/cpugroup.ts';
import { loadavg, machine } from './support/machine.ts';
import { dist, round, type Dist } from './support/stats.ts';

const { values: flags } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    pairs: { type: 'string', default: '5' },
    'slow-ms': { type: 'string', default: '300' },
    'node-cpu-shares': { type: 'string', default: '8192' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'conflict.json') },
  },
});
const RUNS = Number(flags.runs);
const PAIRS = Number(flags.pairs);
const SLOW_MS = Number(flags['slow-ms']);
const SHARES = Number(flags['node-cpu-shares']);
const NODE = 'bench-conflict-node';
const say = (s: string) => process.stdout.write(`${s}\n`);

export interface ConflictRun {
  conflicting: Dist;
  plain: Dist;
  /** conflicting minus plain, per pair (ms). */
  added: Dist;
  /** The agent's writes answered 409 in this run: at least one per pair, or no conflict was made. */
  conflicts: number;
  /** Times the slow webhook admitted one of the agent's writes, per pair (a plain change costs one). */
  admissionsPerPair: number;
  pairs: ConflictPair[];
}

async function main(): Promise<void> {
  const work = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-bench-conflict-'));
  const cluster = await startBenchCluster(NODE, work);
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.cp.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const group = SHARES > 0 ? CpuGroup.create('ownerrefs-bench-conflict', SHARES) : undefined;
  let agent: Awaited<ReturnType<typeof startAgent>> | undefined;
  let slow: Awaited<ReturnType<typeof startTestWebhook>> | undefined;
  try {
    const built = buildAgent();
    agent = await startAgent({ main: built.main, nodeFlags: built.nodeFlags, kubeconfig: cluster.agentKubeconfig, nodeName: NODE, kubeletRoot: path.join(work, 'kubelet') });
    await waitFor(() => agent!.ready(), { describe: 'the agent ready', timeoutMs: 120_000 });
    group?.add(agent.pid);
    const owners = await Promise.all(Array.from({ length: 2 * PAIRS * RUNS }, async (_, i) =>
      (await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: `conflict-owner-${i}` } } })).metadata!));
    slow = await startTestWebhook(kc, { name: 'slow', namespace: NS, operations: ['UPDATE'], mutate: () => [],
      delayMs: (r) => (r.userInfo.username === AGENT_USER ? SLOW_MS : 0) });
    const agentAdmissions = () => slow!.requests.filter((r) => r.userInfo.username === AGENT_USER).length;
    const runs: ConflictRun[] = [];
    for (let run = 0; run < RUNS; run++) {
      const name = `reader-${run}`;
      await core.createNamespacedPod({ namespace: NS, body: readerPod(name, NODE) });
      await waitFor(async () => (await core.readNamespacedPod({ name, namespace: NS })).metadata?.annotations?.[ANNOTATIONS.ownerReferences], { describe: `${name}: the agent's first value`, timeoutMs: 60_000 });
      const before = await agent.metric('ownerrefs_annotation_writes_total', 'result="conflict"');
      const admittedBefore = agentAdmissions();
      const pairs = await conflictPairs(core, { namespace: NS, name, pairs: PAIRS, slowMs: SLOW_MS,
        owners: owners.slice(2 * PAIRS * run, 2 * PAIRS * (run + 1)).map((m) => ({ name: m.name!, uid: m.uid! })) });
      const conflicts = await agent.metric('ownerrefs_annotation_writes_total', 'result="conflict"') - before;
      const r: ConflictRun = { conflicting: dist(pairs.map((p) => p.conflicting)), plain: dist(pairs.map((p) => p.plain)),
        added: dist(pairs.map((p) => p.conflicting - p.plain)), conflicts, admissionsPerPair: (agentAdmissions() - admittedBefore) / PAIRS, pairs: pairs.map((p) => ({ conflicting: round(p.conflicting, 1), plain: round(p.plain, 1) })) };
      runs.push(r);
      say(`run ${run + 1}: conflicting p50 ${round(r.conflicting.p50, 1)} ms, plain (floor) p50 ${round(r.plain.p50, 1)} ms; ` +
        `a conflict added p50 ${round(r.added.p50, 1)} ms (${round(r.added.min, 1)} to ${round(r.added.max, 1)}, ${PAIRS} pairs), one more held write is ${SLOW_MS} ms; 409s ${conflicts}, the agent's writes admitted ${r.admissionsPerPair} times a pair`);
      await core.deleteNamespacedPod({ name, namespace: NS, gracePeriodSeconds: 0 });
    }
    const all = runs.flatMap((r) => r.pairs);
    const added = dist(all.map((p) => p.conflicting - p.plain));
    say(`all ${all.length} pairs: a conflict added p50 ${round(added.p50, 1)} ms, p95 ${round(added.p95, 1)} ms (${round(added.min, 1)} to ${round(added.max, 1)}); run medians ${runs.map((r) => round(r.added.p50, 0)).join(', ')} ms`);
    const out = { date: new Date().toISOString(), machine: machine(), versions: cluster.versions, slowMs: SLOW_MS, nodeCpuShares: SHARES > 0 ? SHARES : undefined,
      loadavg: loadavg(), added, runs };
    mkdirSync(path.dirname(flags.out!), { recursive: true });
    writeFileSync(flags.out!, JSON.stringify(out, null, 2) + '\n');
    say(`results in ${path.relative(process.cwd(), flags.out!)}`);
    const none = runs.filter((r) => r.conflicts < PAIRS);
    if (none.length > 0) throw new Error(`expected at least one 409 per pair, got ${none.map((r) => r.conflicts).join(', ')} in runs of ${PAIRS} pairs`);
  } finally {
    await slow?.remove();
    await agent?.stop();
    group?.remove();
    await cluster.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  main().then(() => process.exit(0), (err: unknown) => {
    process.stderr.write(`bench:conflict failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  });
}
