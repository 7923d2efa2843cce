// One phase of bench/surge.ts: pods created open-loop at one rate for a few seconds, and what
// it cost each process meanwhile: the webhook replicas (CPU from /proc/<pid>/stat, reviews
// from their metric, RSS peak), the second webhook (its thread), the bench's own main
// thread (the client that sends, and the egress proxy's byte pipe) with its event-loop
// delay, and the API server and etcd.

import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { WebhookProcess } from '../../localcluster/webhookproc.ts';
import type { OtherStats, OtherWebhook } from './otherwebhook.ts';
import { Contention, sample } from './proc.ts';
import { achievedRate, errorKind } from './saturation.ts';
import { NS } from './cluster.ts';
import { nowMs, round } from './stats.ts';
import { sendAt } from './webhookpods.ts';

export interface Phase {
  rate: number;
  sent: number;
  ok: number;
  timeouts: number;
  errors: number;
  /** A few refusals' messages, clipped. */
  errorSamples: string[];
  achieved: number;
  /** Latencies of the answered creates, ms from when each was due (kept out of the JSON). */
  ms: number[];
  wallS: number;
  /** Per replica, in the order started. */
  reviews: number[];
  cpuTicksS: number[];
  cpuS: number[];
  rssPeakMiB: number[];
  other?: OtherStats;
  benchMainCpuS: number;
  benchLoopDelayP99Ms: number;
  apiserverCpuS: number;
  etcdCpuS: number;
  /** The controller manager and the scheduler (which tries each pod and fails: they ask for no node), together. */
  controllersCpuS: number;
  /** The whole machine's busy CPU time (/proc/stat): anything beside the bench's own shows here. */
  machineBusyS: number;
}

export interface Probes {
  replicas: readonly WebhookProcess[];
  other?: OtherWebhook;
  pids: { apiserver?: number | undefined; etcd: number; controllerManager?: number | undefined; scheduler?: number | undefined };
}

const REVIEWS = 'ownerrefs_webhook_reviews_total';

/** Busy CPU seconds of the whole machine since boot: all but idle and iowait (USER_HZ ticks). */
function machineBusyS(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f.reduce((a, b) => a + b, 0) - f[3]! - f[4]!) / 100;
}

function threadCpuS(): number {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1e6;
}

export async function runPhase(core: CoreV1Api, pods: readonly V1Pod[], rate: number, probes: Probes, giveUpMs: number): Promise<Phase> {
  const pids = probes.replicas.map((r) => r.child.pid!);
  const reviews0 = await Promise.all(probes.replicas.map((r) => r.metric(REVIEWS)));
  const other0 = await probes.other?.stats();
  const s0 = pids.map((p) => sample(p));
  const peak = s0.map((s) => s.rssMiB);
  const sampler = setInterval(() => pids.forEach((p, i) => { peak[i] = Math.max(peak[i]!, sample(p).rssMiB); }), 200);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const cp = new Contention(probes.pids);
  const main0 = threadCpuS();
  const busy0 = machineBusyS();
  const start = nowMs();
  let timer: NodeJS.Timeout | undefined;
  const sent = await Promise.race([sendAt(core, pods, rate), new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${pods.length} creates at ${rate}/s: not all answered after ${giveUpMs / 1000} s`)), giveUpMs);
  })]).finally(() => clearTimeout(timer));
  const wallS = (nowMs() - start) / 1000;
  const mainCpuS = threadCpuS() - main0;
  const busyS = machineBusyS() - busy0;
  const shares = cp.since();
  loop.disable();
  clearInterval(sampler);
  const s1 = pids.map((p) => sample(p));
  const other1 = await probes.other?.stats();
  const reviews1 = await Promise.all(probes.replicas.map((r) => r.metric(REVIEWS)));
  const failed = sent.filter((s) => 'err' in s);
  const kinds = failed.map((s) => errorKind(s.err));
  const samples = [...new Set(failed.map((s) => {
    const e = s.err as { body?: unknown; message?: unknown };
    return String(typeof e.body === 'string' ? e.body : e.message ?? e).slice(0, 300);
  }))].slice(0, 3);
  const ok = sent.filter((s) => !('err' in s));
  return {
    rate, sent: sent.length, ok: ok.length, timeouts: kinds.filter((k) => k === 'timeout').length, errors: kinds.filter((k) => k === 'error').length,
    errorSamples: samples, achieved: round(achievedRate(ok.map((s) => s.doneMs), start), 1), ms: ok.map((s) => s.ms), wallS: round(wallS, 2),
    reviews: reviews1.map((r, i) => r - reviews0[i]!),
    cpuTicksS: s1.map((s, i) => round(s.cpuTicksS - s0[i]!.cpuTicksS, 2)),
    cpuS: s1.map((s, i) => round(s.cpuS - s0[i]!.cpuS, 3)),
    rssPeakMiB: peak.map((x) => round(x, 1)),
    ...other0 && other1 ? { other: { requests: other1.requests - other0.requests, cpuS: round(other1.cpuS - other0.cpuS, 3) } } : {},
    benchMainCpuS: round(mainCpuS, 3), benchLoopDelayP99Ms: round(loop.percentile(99) / 1e6, 1),
    apiserverCpuS: shares.apiserver?.cpuS ?? NaN, etcdCpuS: shares.etcd?.cpuS ?? NaN,
    controllersCpuS: round((shares.controllerManager?.cpuS ?? 0) + (shares.scheduler?.cpuS ?? 0), 3), machineBusyS: round(busyS, 2),
  };
}

/** Deletes the bench's webhook pods and waits until none is left, so each phase meets the same store. */
export async function clearPods(core: CoreV1Api): Promise<void> {
  await core.deleteCollectionNamespacedPod({ namespace: NS, labelSelector: 'app=wh' });
  for (let i = 0; i < 600; i++) {
    const left = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=wh', limit: 1 });
    if (left.items.length === 0) return;
    await sleep(500);
  }
  throw new Error('pods still there 5 min after deleting them');
}
