// bench/surge.ts's arithmetic, pure: what a phase achieved, when the floor or one webhook
// replica saturates, how many replicas a rate needs, and a spread across runs.

/** A create the API server refused because a webhook call outlasted its timeoutSeconds, or any other refusal. */
export function errorKind(err: unknown): 'timeout' | 'error' {
  const e = err as { body?: unknown; message?: unknown } | undefined;
  const text = `${typeof e?.body === 'string' ? e.body : JSON.stringify(e?.body ?? '')} ${String(e?.message ?? err)}`;
  return /deadline exceeded|timed? ?out|Timeout/i.test(text) ? 'timeout' : 'error';
}

/** Creates answered a second: answered creates over the time from the first one's due time to the last answer. */
export function achievedRate(doneMs: readonly number[], startMs: number): number {
  if (doneMs.length === 0) return 0;
  const span = Math.max(...doneMs) - startMs;
  return span > 0 ? (doneMs.length * 1000) / span : 0;
}

/** Past these the API server is not keeping up: it answers under 90% of the rate sent, or its p99 passes a second (the queue grows). */
export const KEEPS_UP = { achieved: 0.9, p99Ms: 1_000 } as const;

export interface FloorPhase { target: number; achieved: number; p99: number }

/** The floor (no call of ours) fell behind: the control plane itself, or the bench's client, saturates here. */
export function floorSaturated(f: FloorPhase): boolean {
  return f.achieved < KEEPS_UP.achieved * f.target || f.p99 > KEEPS_UP.p99Ms;
}

/** One replica's share of a core, past which it is called saturated: a Node process does its JavaScript on one thread. */
export const REPLICA_CORE_LIMIT = 0.8;

export interface ReplicaPhase {
  rate: number;
  /** The busiest replica's CPU over the phase, in cores. */
  busiestCores: number;
  timeouts: number;
  errors: number;
  /** Reviews answered over creates admitted, in this phase (under 1: reviews fall behind). */
  reviewsPerCreate: number;
  achieved: number;
  /** The floor at the same rate kept up. */
  floorKeptUp: boolean;
}

/**
 * Why one replica is saturated at this phase, or undefined if it is not. Where the floor itself
 * fell behind, timeouts and late reviews are the control plane's as much as the replica's, so
 * only the replica's own CPU can say it saturated there.
 */
export function replicaSaturated(p: ReplicaPhase): string | undefined {
  if (p.busiestCores >= REPLICA_CORE_LIMIT) return `a replica used ${p.busiestCores.toFixed(2)} of a core (>= ${REPLICA_CORE_LIMIT})`;
  if (!p.floorKeptUp) return undefined;
  if (p.timeouts > 0) return `${p.timeouts} creates timed out calling the webhook`;
  if (p.reviewsPerCreate < 0.95) return `reviews fell behind creates (${p.reviewsPerCreate.toFixed(2)} per create)`;
  if (p.achieved < KEEPS_UP.achieved * p.rate) return `achieved ${p.achieved.toFixed(0)}/s of ${p.rate}/s while the floor kept up`;
  return undefined;
}

/** The lowest rate at which one replica saturates, with why; undefined if none of the rates measured. */
export function firstSaturated(phases: readonly ReplicaPhase[]): { rate: number; why: string } | undefined {
  for (const p of [...phases].sort((a, b) => a.rate - b.rate)) {
    const why = replicaSaturated(p);
    if (why) return { rate: p.rate, why };
  }
  return undefined;
}

/** Reviews a second at which one replica would use `cores` of CPU, from CPU seconds per 1,000 reviews. */
export function reviewsAt(cpuPer1kS: number, cores: number): number {
  return cpuPer1kS > 0 ? (cores * 1000) / cpuPer1kS : Infinity;
}

/** Replicas for `rate` reviews a second, each kept under `budgetCores` of CPU; at least `min` (availability). */
export function replicasFor(rate: number, cpuPer1kS: number, budgetCores: number, min = 1): number {
  return Math.max(min, Math.ceil((rate * cpuPer1kS) / 1000 / budgetCores - 1e-9));
}

export interface Spread { min: number; median: number; max: number }

/** Min, median (the lower of the two middle values, for an even count) and max; NaNs left out. */
export function spread(xs: readonly number[]): Spread {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return { min: NaN, median: NaN, max: NaN };
  return { min: s[0]!, median: s[Math.floor((s.length - 1) / 2)]!, max: s.at(-1)! };
}
