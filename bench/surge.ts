// The admission webhook under a pod-creation surge: pods in the KEP-4753 syntax created
// open-loop (each sent when due, answered or not) at each --rates for --seconds, sustained,
// against the floor (the same pods without the fields: no call of ours) at the same rate in
// the same run, the phases of one rate interleaved (their order rotated from rate to rate)
// so that machine noise falls on all of them. Beside a second mutating webhook that every
// pod of the namespace calls, the floor's included (bench/support/otherwebhook.ts).
//
// Arms: one replica by URL (`url`), one replica behind the Service (`svc-1`), and --replicas
// behind it (`svc-N`), the API server spreading them by its own endpoint routing
// (bench/support/replicas.ts says why that way, and `url` against `svc-1` is the routing's
// own cost). Per rate and arm: added latency p50/p99 against the floor, the rate achieved,
// refusals (webhook timeouts apart), webhook CPU per 1,000 reviews (utime+stime over its
// reviews metric), RSS peak, each replica's share of the reviews. Then where one replica
// saturates and how many replicas a rate needs (bench/support/surgereport.ts). If the floor
// itself falls behind at a rate, that is this machine's control plane: the bench says so and
// goes no higher.
//
//   npm run bench:surge                        rates 50,100,200,400, 10 s each way
//   npm run bench:surge -- --append            add this run to the file's runs (spread across runs)
//   npm run bench:surge:smoke                  rates 20,50, 3 s (CI; asserts no timing)
//
// Results: bench/results/webhook-surge.json.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { NODE_FLAGS } from '../agent/config.ts';
import { WEBHOOK_NAMESPACE } from '../projections/names.ts';
import { TMP, buildAgent } from './support/agent.ts';
import { NS, startBenchCluster, type Owner } from './support/cluster.ts';
import { gitState, loadavg, machine } from './support/machine.ts';
import { startOtherWebhook, type OtherWebhook } from './support/otherwebhook.ts';
import { startReplicas, type Route } from './support/replicas.ts';
import { floorSaturated } from './support/saturation.ts';
import { clearPods, runPhase, type Phase, type Probes } from './support/surgephase.ts';
import { armRow, floorRow, judge, printRun, spreadAcross, type Arm, type RateResult, type SurgeRun } from './support/surgereport.ts';
import { kepPod, plain } from './support/webhookpods.ts';

const { values } = parseArgs({ allowNegative: true, options: {
  rates: { type: 'string', default: '50,100,200,400' },
  seconds: { type: 'string', default: '10' },
  rounds: { type: 'string', default: '1' },
  replicas: { type: 'string', default: '3' },
  'second-webhook': { type: 'boolean', default: true }, // --no-second-webhook: ours alone
  append: { type: 'boolean', default: false },
  out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'webhook-surge.json') },
} });
const rates = values.rates.split(',').map(Number);
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const n = Number(values.replicas);
const second = values['second-webhook'];

// url: replica 1 by URL; svc-1: replica 0 through the Service; svc-N: all of them. Which
// replicas answer tells that a routing change took effect (the others' reviews are "stray").
const ARMS: Arm[] = [
  { name: 'url', replicas: [1 % n], route: { url: 1 % n } },
  { name: 'svc-1', replicas: [0], route: { service: 1 } },
  ...n > 1 ? [{ name: `svc-${n}`, replicas: Array.from({ length: n }, (_, i) => i), route: { service: n } as Route }] : [],
];

// Stopped early (Ctrl-C, a CI timeout): exit, so the webhooks' exit handler kills them and the
// control plane's reaper its processes.
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));

let serial = 0;
const podsFor = (what: 'kep' | 'floor', owner: Owner, count: number): V1Pod[] => Array.from({ length: count }, () => {
  const p = kepPod(serial, owner);
  const pod = what === 'kep' ? p : plain(p);
  return { ...pod, metadata: { ...pod.metadata, name: `surge-${serial++}` } };
});

async function surge(): Promise<SurgeRun> {
  const workDir = path.join(TMP, `surge-${process.pid}`);
  mkdirSync(workDir, { recursive: true });
  const main = buildAgent(undefined, 'webhook').main;
  const cluster = await startBenchCluster('bench-node', workDir, { realNodes: true });
  let other: OtherWebhook | undefined;
  let replicas: Awaited<ReturnType<typeof startReplicas>> | undefined;
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.cp.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: WEBHOOK_NAMESPACE } } }).catch(() => undefined);
    if (second) other = await startOtherWebhook(cluster.cp.kubeconfigPath, NS);
    replicas = await startReplicas(kc, workDir, n, { main, nodeFlags: NODE_FLAGS });
    const probes: Probes = { replicas: replicas.procs, ...other ? { other } : {}, pids: cluster.cp.pids };
    const owner = cluster.owners[0];
    const giveUpMs = (seconds + 120) * 1000;
    // Warm every path (connections, the API server's caches and routing, V8 in each replica).
    for (const arm of ARMS) {
      await replicas.route(arm.route);
      await runPhase(core, podsFor('kep', owner, Math.ceil(rates[0]! * 2)), rates[0]!, probes, giveUpMs);
    }
    await runPhase(core, podsFor('floor', owner, Math.ceil(rates[0]! * 2)), rates[0]!, probes, giveUpMs);
    await clearPods(core);
    const results: RateResult[] = [];
    const loadBefore = loadavg();
    for (const [ri, rate] of rates.entries()) {
      const count = Math.round(rate * seconds);
      const phases = new Map<string, Phase[]>();
      const order: (Arm | 'floor')[] = ['floor', ...ARMS];
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < order.length; k++) {
          const what = order[(ri + r + k) % order.length]!;
          if (what !== 'floor') await replicas.route(what.route);
          const phase = await runPhase(core, podsFor(what === 'floor' ? 'floor' : 'kep', owner, count), rate, probes, giveUpMs);
          const name = what === 'floor' ? 'floor' : what.name;
          phases.set(name, [...phases.get(name) ?? [], phase]);
          await clearPods(core);
          console.log(`  ${rate}/s ${name}: ${phase.ok}/${phase.sent} answered at ${phase.achieved}/s, ${phase.timeouts + phase.errors} refused`);
        }
      }
      const floor = floorRow(rate, phases.get('floor')!);
      const arms = ARMS.map((a) => armRow(a, rate, phases.get(a.name)!, floor));
      const saturated = floorSaturated({ target: rate, achieved: floor.achieved, p99: floor.lat.p99 });
      results.push({ rate, floor, arms, floorSaturated: saturated });
      if (saturated) {
        console.log(`  the floor fell behind at ${rate}/s (achieved ${floor.achieved}/s, p99 ${floor.lat.p99} ms): this machine's control plane; no higher rate`);
        break;
      }
    }
    return { startedAt: new Date().toISOString(), versions: cluster.versions, loadavgBefore: loadBefore, loadavgAfter: loadavg(), rates: results, ...judge(results, ARMS) };
  } finally {
    await other?.stop().catch(() => undefined);
    await replicas?.stop().catch(() => undefined);
    await cluster.stop();
  }
}

const run = await surge();
printRun(run);
const config = { rates, seconds, rounds, replicas: n, secondWebhook: second, arms: ARMS.map((a) => a.name) };
type Out = { runs: SurgeRun[]; config: typeof config };
const previous = values.append && existsSync(values.out) ? JSON.parse(readFileSync(values.out, 'utf8')) as Out : undefined;
if (previous && JSON.stringify(previous.config) !== JSON.stringify(config)) throw new Error(`--append: ${values.out} holds runs of another configuration`);
const runs = [...previous?.runs ?? [], run];
mkdirSync(path.dirname(values.out), { recursive: true });
writeFileSync(values.out, JSON.stringify({
  machine: machine(), versions: run.versions, git: gitState(), config,
  routing: 'svc-N: the API server resolves the webhook Service to an EndpointSlice endpoint at random per new connection (--enable-aggregator-routing), through the harness\'s loopback egress proxy; url: straight to one replica (bench/support/replicas.ts)',
  runs, spread: spreadAcross(runs),
}, null, 2) + '\n');
console.log(`wrote ${values.out} (${runs.length} run${runs.length > 1 ? 's' : ''})`);
