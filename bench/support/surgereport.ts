// bench/surge.ts's rows and verdicts: per rate and arm, the phases pooled and set against
// the floor of the same rate and run; where one replica saturates; replicas per rate; and
// the spread of the main numbers across runs.

import type { Route } from './replicas.ts';
import { firstSaturated, floorSaturated, replicasFor, reviewsAt, spread, type ReplicaPhase, type Spread } from './saturation.ts';
import { dist, round, type Dist } from './stats.ts';
import type { Phase } from './surgephase.ts';

export interface Arm { name: string; replicas: number[]; route: Route }

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const median = (xs: readonly number[]) => spread(xs).median;

export interface FloorRow {
  rate: number; sent: number; ok: number; timeouts: number; errors: number; errorSamples: string[]; achieved: number; lat: Dist;
  otherWebhook?: { requests: number; cpuS: number };
  benchMainCores: number; benchLoopDelayP99Ms: number; apiserverCores: number; etcdCores: number; controllersCores: number;
  /** The machine's busy cores over the phase (of os.cpus().length), everything included. */
  machineBusyCores: number;
}

export interface ArmRow extends FloorRow {
  arm: string;
  addedP50: number;
  addedP99: number;
  /** Reviews answered by the arm's replicas, and by the others (a routing change not yet seen). */
  reviews: number;
  strayReviews: number;
  reviewsPerCreate: number;
  /** Each of the arm's replicas' share of its reviews. */
  reviewShare: number[];
  /** utime+stime of the arm's replicas (/proc/<pid>/stat, 10 ms ticks), and the same from schedstat (ns). */
  cpuTicksS: number;
  cpuS: number;
  cpuPer1kReviewsS: number;
  busiestReplicaCores: number;
  rssPeakMiB: number;
}

export interface RateResult { rate: number; floor: FloorRow; arms: ArmRow[]; floorSaturated: boolean }

function common(rate: number, phases: readonly Phase[]): FloorRow {
  const wall = sum(phases.map((p) => p.wallS));
  const others = phases.flatMap((p) => p.other ? [p.other] : []);
  return {
    rate, sent: sum(phases.map((p) => p.sent)), ok: sum(phases.map((p) => p.ok)),
    timeouts: sum(phases.map((p) => p.timeouts)), errors: sum(phases.map((p) => p.errors)),
    errorSamples: [...new Set(phases.flatMap((p) => p.errorSamples))].slice(0, 3),
    achieved: round(sum(phases.map((p) => p.achieved)) / phases.length, 1), lat: dist(phases.flatMap((p) => p.ms)),
    ...others.length > 0 ? { otherWebhook: { requests: sum(others.map((o) => o.requests)), cpuS: round(sum(others.map((o) => o.cpuS)), 3) } } : {},
    benchMainCores: round(sum(phases.map((p) => p.benchMainCpuS)) / wall, 3), benchLoopDelayP99Ms: Math.max(...phases.map((p) => p.benchLoopDelayP99Ms)),
    apiserverCores: round(sum(phases.map((p) => p.apiserverCpuS)) / wall, 3), etcdCores: round(sum(phases.map((p) => p.etcdCpuS)) / wall, 3),
    controllersCores: round(sum(phases.map((p) => p.controllersCpuS)) / wall, 3), machineBusyCores: round(sum(phases.map((p) => p.machineBusyS)) / wall, 2),
  };
}

export function floorRow(rate: number, phases: readonly Phase[]): FloorRow {
  return common(rate, phases);
}

export function armRow(arm: Arm, rate: number, phases: readonly Phase[], floor: FloorRow): ArmRow {
  const c = common(rate, phases);
  const mine = (xs: readonly number[]) => sum(arm.replicas.map((i) => xs[i]!));
  const perReplica = arm.replicas.map((i) => sum(phases.map((p) => p.reviews[i]!)));
  const reviews = sum(perReplica);
  const all = sum(phases.map((p) => sum(p.reviews)));
  const cpuTicksS = round(sum(phases.map((p) => mine(p.cpuTicksS))), 2);
  return {
    ...c, arm: arm.name,
    addedP50: round(c.lat.p50 - floor.lat.p50, 2), addedP99: round(c.lat.p99 - floor.lat.p99, 2),
    reviews, strayReviews: all - reviews, reviewsPerCreate: round(reviews / Math.max(1, c.ok), 3),
    reviewShare: perReplica.map((r) => round(r / Math.max(1, reviews), 3)),
    cpuTicksS, cpuS: round(sum(phases.map((p) => mine(p.cpuS))), 3), cpuPer1kReviewsS: round((cpuTicksS * 1000) / Math.max(1, reviews), 3),
    busiestReplicaCores: round(Math.max(...phases.flatMap((p) => arm.replicas.map((i) => p.cpuS[i]! / p.wallS))), 3),
    rssPeakMiB: Math.max(...phases.flatMap((p) => arm.replicas.map((i) => p.rssPeakMiB[i]!))),
  };
}

/** Per replica: a budget of half a core (its JavaScript runs on one thread; no CPU limit in the chart), and the chart's CPU request. */
export const BUDGET_CORES = 0.5;
export const CHART_CPU_REQUEST_CORES = 0.02; // charts/ownerrefs-agent/values.yaml webhook.resources.requests.cpu: 20m
const RULE_RATES = [50, 100, 200, 400, 1000, 2000];

export interface Verdict {
  floorSaturatedAt: number | null;
  oneReplica: {
    /** The lowest rate measured at which one replica (svc-1) saturated, with why; null if none did. */
    observed: { rate: number; why: string } | null;
    cpuPer1kReviewsS: { median: number; max: number };
    /** Reviews a second at which one replica would use a whole core, and half of one (from the median). */
    fullCoreAtReviewsPerS: number;
    halfCoreAtReviewsPerS: number;
    /** Reviews a second one replica's 20m CPU request covers. */
    requestCoversReviewsPerS: number;
  };
  /** replicas = max(2, ceil(rate x CPU per review / 0.5 core)), from the largest CPU per 1,000 reviews measured (any arm) at a rate the floor kept up with. */
  rule: { cpuPer1kReviewsS: number; budgetCores: number; replicas: { rate: number; replicas: number; coresPerReplica: number }[] };
}

export function judge(results: readonly RateResult[], arms: readonly Arm[]): Verdict {
  const one = results.map((r) => ({ r, a: r.arms.find((a) => a.arm === 'svc-1')! }));
  const phases: ReplicaPhase[] = one.map(({ r, a }) => ({
    rate: r.rate, busiestCores: a.busiestReplicaCores, timeouts: a.timeouts, errors: a.errors, reviewsPerCreate: a.reviewsPerCreate,
    achieved: a.achieved, floorKeptUp: !floorSaturated({ target: r.rate, achieved: r.floor.achieved, p99: r.floor.lat.p99 }),
  }));
  // CPU per review is counted only where the floor kept up: past that, every process on the
  // machine waits for a core, and a review's CPU time grows with the contention, not the load.
  // (When the floor fell behind at every rate, all of them count: there is nothing better.)
  const keptUp = (r: RateResult) => !r.floorSaturated || results.every((x) => x.floorSaturated);
  const kept = results.filter(keptUp);
  const cpu = one.filter(({ r }) => keptUp(r)).map(({ a }) => a.cpuPer1kReviewsS);
  const worst = Math.max(...kept.flatMap((r) => r.arms.filter((a) => arms.some((x) => x.name === a.arm)).map((a) => a.cpuPer1kReviewsS)));
  return {
    floorSaturatedAt: results.find((r) => r.floorSaturated)?.rate ?? null,
    oneReplica: {
      observed: firstSaturated(phases) ?? null,
      cpuPer1kReviewsS: { median: median(cpu), max: Math.max(...cpu) },
      fullCoreAtReviewsPerS: Math.round(reviewsAt(median(cpu), 1)),
      halfCoreAtReviewsPerS: Math.round(reviewsAt(median(cpu), BUDGET_CORES)),
      requestCoversReviewsPerS: round(reviewsAt(median(cpu), CHART_CPU_REQUEST_CORES), 1),
    },
    rule: { cpuPer1kReviewsS: worst, budgetCores: BUDGET_CORES, replicas: RULE_RATES.map((rate) => {
      const replicas = replicasFor(rate, worst, BUDGET_CORES, 2);
      return { rate, replicas, coresPerReplica: round((rate * worst) / 1000 / replicas, 3) };
    }) },
  };
}

export interface SurgeRun extends Verdict {
  startedAt: string;
  versions: { kubernetes: string; etcd: string };
  loadavgBefore: number[];
  loadavgAfter: number[];
  rates: RateResult[];
}

export function printRun(run: SurgeRun): void {
  const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-').padStart(7);
  console.log(`surge (load ${run.loadavgBefore.join(' ')} before, ${run.loadavgAfter.join(' ')} after)`);
  console.log('   rate arm     floor p50/p99 ms    added p50/p99 ms  achieved  to/err  CPU s/1k rev  busiest  RSS MiB  share          apiserver, machine busy');
  for (const r of run.rates) {
    const fl = r.floor;
    console.log(`${String(r.rate).padStart(7)} floor  ${f(fl.lat.p50)} ${f(fl.lat.p99)}                      ${f(fl.achieved)}  ${fl.timeouts}/${fl.errors}` +
      `${' '.repeat(44)}${f(fl.apiserverCores, 2)}, ${f(fl.machineBusyCores, 2)} cores${r.floorSaturated ? '  FLOOR SATURATED' : ''}`);
    for (const a of r.arms) {
      console.log(`${' '.repeat(8)}${a.arm.padEnd(6)} ${f(a.lat.p50)} ${f(a.lat.p99)}     ${f(a.addedP50)} ${f(a.addedP99)}   ${f(a.achieved)}  ${a.timeouts}/${a.errors}` +
        `   ${f(a.cpuPer1kReviewsS, 3)}     ${f(a.busiestReplicaCores, 2)}  ${f(a.rssPeakMiB)}  ${a.reviewShare.map((s) => s.toFixed(2)).join(',').padEnd(14)} ${f(a.apiserverCores, 2)}, ${f(a.machineBusyCores, 2)} cores` +
        `${a.strayReviews ? ` (${a.strayReviews} stray)` : ''}`);
    }
  }
  const o = run.oneReplica;
  console.log(`  floor saturated at: ${run.floorSaturatedAt ?? 'none of the rates'}`);
  console.log(`  one replica: ${o.observed ? `saturated at ${o.observed.rate}/s: ${o.observed.why}` : 'not saturated at any rate measured'}; CPU per 1,000 reviews median ${o.cpuPer1kReviewsS.median} s` +
    ` (max ${o.cpuPer1kReviewsS.max}): a whole core at ~${o.fullCoreAtReviewsPerS} reviews/s, half at ~${o.halfCoreAtReviewsPerS}/s; its 20m request covers ${o.requestCoversReviewsPerS}/s`);
  console.log(`  replicas (<= ${run.rule.budgetCores} core each, at ${run.rule.cpuPer1kReviewsS} s/1k reviews, at least 2): ${run.rule.replicas.map((x) => `${x.rate}/s: ${x.replicas}`).join(', ')}`);
}

/** Per rate and arm, across runs: min, median, max of the main numbers. */
export function spreadAcross(runs: readonly SurgeRun[]): Record<string, Record<string, Spread>> {
  const out: Record<string, Record<string, Spread>> = {};
  const rates = [...new Set(runs.flatMap((r) => r.rates.map((x) => x.rate)))];
  for (const rate of rates) {
    const at = runs.flatMap((r) => r.rates.filter((x) => x.rate === rate));
    out[`${rate} floor`] = { p50: spread(at.map((x) => x.floor.lat.p50)), p99: spread(at.map((x) => x.floor.lat.p99)), achieved: spread(at.map((x) => x.floor.achieved)) };
    for (const name of [...new Set(at.flatMap((x) => x.arms.map((a) => a.arm)))]) {
      const arms = at.flatMap((x) => x.arms.filter((a) => a.arm === name));
      out[`${rate} ${name}`] = {
        addedP50: spread(arms.map((a) => a.addedP50)), addedP99: spread(arms.map((a) => a.addedP99)),
        cpuPer1kReviewsS: spread(arms.map((a) => a.cpuPer1kReviewsS)), achieved: spread(arms.map((a) => a.achieved)),
        refused: spread(arms.map((a) => a.timeouts + a.errors)),
      };
    }
  }
  return out;
}
