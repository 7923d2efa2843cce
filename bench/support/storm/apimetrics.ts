// The API server's own account of a window, for bench:storm: from two scrapes of its
// /metrics, the PATCHes on pods it served (rate and latency, from
// apiserver_request_duration_seconds) and what API Priority and Fairness did per priority
// level: requests dispatched, rejected (429), and the time they waited in its queues.

import path from 'node:path';
import type { ControlPlane } from '../../../localcluster/controlplane/controlplane.ts';
import { httpCall } from '../../../localcluster/controlplane/net.ts';
import { round } from '../stats.ts';

/** One scrape: every sample line, by its name with labels. */
export type Scrape = Map<string, number>;

export async function scrape(cp: ControlPlane): Promise<Scrape> {
  const tls = { ca: cp.caPath, cert: path.join(cp.workDir, 'pki', 'admin.crt'), key: path.join(cp.workDir, 'pki', 'admin.key') };
  return parseMetrics((await httpCall(`${cp.server}/metrics`, { tls })).body);
}

export function parseMetrics(text: string): Scrape {
  const out: Scrape = new Map();
  for (const l of text.split('\n')) {
    if (!l || l.startsWith('#')) continue;
    const at = l.lastIndexOf(' ');
    out.set(l.slice(0, at), Number(l.slice(at + 1)));
  }
  return out;
}

/** Sum of `name`'s series whose labels contain every `labels` substring, b minus a. */
export function increase(a: Scrape, b: Scrape, name: string, ...labels: string[]): number {
  let n = 0;
  for (const [k, v] of b) {
    if ((k === name || k.startsWith(`${name}{`)) && labels.every((x) => k.includes(x))) n += v - (a.get(k) ?? 0);
  }
  return n;
}

/**
 * The q-quantile (0..1) of a Prometheus histogram's increase between two scrapes, its
 * buckets summed over the series matching `labels`, interpolated linearly within the bucket
 * as Prometheus' histogram_quantile does. NaN when nothing was observed.
 */
export function histogramQuantile(a: Scrape, b: Scrape, name: string, q: number, ...labels: string[]): number {
  const byLe = new Map<number, number>();
  for (const [k] of b) {
    if (!k.startsWith(`${name}_bucket{`) || !labels.every((x) => k.includes(x))) continue;
    const le = /le="([^"]+)"/.exec(k)?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    byLe.set(bound, (byLe.get(bound) ?? 0) + (b.get(k)! - (a.get(k) ?? 0)));
  }
  return quantileOfBuckets([...byLe].sort((x, y) => x[0] - y[0]), q);
}

/** Cumulative buckets [upper bound, count] in ascending order: Prometheus' interpolation. */
export function quantileOfBuckets(buckets: readonly (readonly [number, number])[], q: number): number {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return lowerBound; // beyond the last finite bucket: its bound, as Prometheus answers
      return lowerBound + ((le - lowerBound) * (rank - lowerCount)) / Math.max(count - lowerCount, Number.EPSILON);
    }
    lowerBound = le;
    lowerCount = count;
  }
  return lowerBound;
}

export interface ApiWindow {
  seconds: number;
  /** PATCHes of pods the API server answered, per second, and their latency (ms) by its histogram. */
  podPatchesPerSecond: number;
  podPatchMs: { p50: number; p99: number };
  /** Every request it answered, per second. */
  requestsPerSecond: number;
  /** By priority level: dispatched, rejected (429), and queue wait p99 (ms). */
  levels: Record<string, { dispatched: number; rejected: number; waitP99Ms: number }>;
}

export function apiWindow(a: Scrape, b: Scrape, seconds: number, levels: readonly string[]): ApiWindow {
  const patch = ['verb="PATCH"', 'resource="pods"', 'subresource=""'];
  const out: ApiWindow = {
    seconds: round(seconds, 1),
    podPatchesPerSecond: round(increase(a, b, 'apiserver_request_total', ...patch) / seconds, 1),
    podPatchMs: {
      p50: round(1000 * histogramQuantile(a, b, 'apiserver_request_duration_seconds', 0.5, ...patch), 1),
      p99: round(1000 * histogramQuantile(a, b, 'apiserver_request_duration_seconds', 0.99, ...patch), 1),
    },
    requestsPerSecond: round(increase(a, b, 'apiserver_request_total') / seconds, 1),
    levels: {},
  };
  for (const level of levels) {
    const l = `priority_level="${level}"`;
    out.levels[level] = {
      dispatched: increase(a, b, 'apiserver_flowcontrol_dispatched_requests_total', l),
      rejected: increase(a, b, 'apiserver_flowcontrol_rejected_requests_total', l),
      waitP99Ms: round(1000 * histogramQuantile(a, b, 'apiserver_flowcontrol_request_wait_duration_seconds', 0.99, l), 1),
    };
  }
  return out;
}

/** The seats API Priority and Fairness gives each level now (apiserver_flowcontrol_nominal_limit_seats). */
export function nominalSeats(s: Scrape): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of s) {
    if (!k.startsWith('apiserver_flowcontrol_nominal_limit_seats{')) continue;
    const level = /priority_level="([^"]+)"/.exec(k)?.[1];
    if (level) out[level] = v;
  }
  return out;
}
