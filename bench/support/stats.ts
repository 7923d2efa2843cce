// Percentiles and small numeric helpers for the benchmark's report.

export interface Dist {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

/** Nearest-rank percentile of sorted values (p in 0..100). */
export function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function dist(values: readonly number[]): Dist {
  const s = [...values].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: round(pct(s, 50)),
    p95: round(pct(s, 95)),
    p99: round(pct(s, 99)),
    max: round(s[s.length - 1] ?? NaN),
    min: round(s[0] ?? NaN),
    mean: round(s.reduce((a, b) => a + b, 0) / (s.length || 1)),
  };
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Milliseconds on CLOCK_MONOTONIC: comparable across processes on one machine. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Runs fn over items with at most `limit` in flight; results in item order. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
