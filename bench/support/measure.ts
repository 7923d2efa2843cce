// One measured agent life at N pods: start-up, propagation bursts against the floor,
// unrelated churn, memory, CPU and API cost. The caller has created the pods, reset
// their owner and removed their files; this starts the agent (through `start`) and
// stops it at the end.

import { setTimeout as sleep } from 'node:timers/promises';
import { histogram } from './agent.ts';
import type { AgentProcess } from '../../localcluster/agentproc.ts';
import type { BenchCluster } from './cluster.ts';
import type { ProbeProcess } from './ipc.ts';
import { loadavg } from './machine.ts';
import { churn, expectedFile, selfGets, switchOwners, type BenchPod } from './pods.ts';
import { Contention, cpuBetween, sample } from './proc.ts';
import { dist, nowMs, round } from './stats.ts';

const WAIT_MS = 120_000; // give-up bound per wait; never a pass/fail threshold
const SETTLE_MS = 3_000;
/** Quiet probe: after the floor has every event, how long before the files are scanned (their ctime is the measure; this only keeps the scan out of the agent's way). */
const QUIET_SCAN_AFTER_MS = 500;

/** Per pod: when the probe saw the file right, and when the file landed by its ctime (bench/probes/files.ts). */
export interface FileProbeResult { times: Record<string, number>; landed?: Record<string, number>; missing: string[] }

/**
 * One round's answers from the floor and the file probe (bench:fleet's propagation too). Quiet:
 * the floor first, then a pause, then the file scan, which then stays out of the agents' way
 * (the files' ctimes are the measure); otherwise both at once, as the inotify probe times by waking.
 */
export async function awaitProbes(floor: ProbeProcess, files: ProbeProcess, quiet: boolean, timeoutMs: number): Promise<readonly [FileProbeResult, FileProbeResult]> {
  const waitFiles = () => files.call<FileProbeResult>('wait', { timeoutMs });
  if (!quiet) return Promise.all([floor.call<FileProbeResult>('wait', { timeoutMs }), waitFiles()]);
  const fl = await floor.call<FileProbeResult>('wait', { timeoutMs });
  await sleep(QUIET_SCAN_AFTER_MS);
  return [fl, await waitFiles()];
}

export interface MeasureOptions {
  say: (msg: string) => void;
  /** CPU under which the agent counts as idle per 250 ms (V8's profiler alone uses more). */
  quietCpuS: number;
  /**
   * The file probe does not watch during the bursts (bench/probes/files.ts, quiet mode): each
   * file's landing is its ctime, read by a scan after the burst. Propagation is then by ctime.
   */
  quietProbe?: boolean;
}

export async function measureN(n: number, pods: BenchPod[], cluster: BenchCluster, floor: ProbeProcess, files: ProbeProcess,
  start: () => Promise<AgentProcess>, o: MeasureOptions): Promise<Record<string, unknown>> {
  let agent: AgentProcess | undefined;
  try {
    return await measure(n, pods, cluster, floor, files, async () => (agent = await start()), o);
  } finally {
    await agent?.stop(); // idempotent: measure() stops it itself before its API-cost step
  }
}

async function measure(n: number, pods: BenchPod[], cluster: BenchCluster, floor: ProbeProcess, files: ProbeProcess,
  start: () => Promise<AgentProcess>, o: MeasureOptions): Promise<Record<string, unknown>> {
  const say = o.say;
  const out: Record<string, unknown> = { n, load: loadavg() };
  const apf0 = await cluster.agentRequests();
  const api0 = procOf(cluster.cp.pids.apiserver);

  // Start-up: spawn -> every pod's ownerReferences file present with the right bytes.
  await files.call('arm', { items: pods.map((p) => ({ key: p.uid, dir: p.dir, expected: expectedFile(p.owner) })) });
  const agent = await start();
  let readyAt = 0;
  const readyPoll = (async () => {
    while (!(await agent.ready())) await sleep(10);
    readyAt = nowMs();
  })();
  const up = await files.call<FileProbeResult>('wait', { timeoutMs: WAIT_MS });
  await readyPoll;
  if (up.missing.length) throw new Error(`start-up: ${up.missing.length} pods never got their files`);
  const fileTimes = Object.values(up.times).map((t) => t - agent.spawnedAt);
  const api1 = procOf(cluster.cp.pids.apiserver);
  out.startup = {
    allFilesMs: round(Math.max(...fileTimes), 1),
    firstFileMs: round(Math.min(...fileTimes), 1),
    agentStartedLogMs: round(agent.startedAt - agent.spawnedAt, 1),
    readyMs: round(readyAt - agent.spawnedAt, 1),
    apiserverCpuS: round(api1.cpuS - api0.cpuS),
  };
  say(`N=${n} start-up: all files after ${Math.max(...fileTimes).toFixed(0)} ms (process up ${(agent.startedAt - agent.spawnedAt).toFixed(0)} ms, ready ${(readyAt - agent.spawnedAt).toFixed(0)} ms)`);
  // Settle first: start-up work that outlasts the ownerReferences files (a followed owner's
  // chain is written again once its first read returns) belongs to start-up, not to the bursts.
  await sleep(SETTLE_MS);
  const sUp = sample(agent.pid);
  const m0 = await agent.metrics();
  const heapUp = heapOf(m0);
  // Files written from spawn to the end of the settle: one per file per pod, unless start-up
  // writes some twice (with following on, a chain written before its owners were read).
  (out.startup as Record<string, unknown>).fileWrites = m0.get('ownerrefs_file_writes_total') ?? 0;

  // Propagation: switch every pod's owner in bursts; per pod, write returned -> file / floor event.
  const rounds = Math.min(5, Math.max(2, Math.ceil(1000 / n)));
  const agentMs: number[] = [];
  const floorMs: number[] = [];
  const addedMs: number[] = [];
  const writeMs: number[] = [];
  const landedMs: number[] = [];
  const probeLagMs: number[] = [];
  const burstS: number[] = [];
  const c0 = sample(agent.pid);
  // Who had the two cores during the bursts, and who waited for one: the agent's tail is
  // its own work plus the time it was runnable while the API server, etcd and the bench ran.
  const pids = cluster.cp.pids;
  const contention = new Contention({
    agent: agent.pid, floor: floor.child.pid, fileProbe: files.child.pid, bench: process.pid,
    apiserver: pids.apiserver, etcd: pids.etcd, controllerManager: pids.controllerManager, scheduler: pids.scheduler,
  });
  // How long the agent's event loop takes to answer /healthz during the bursts: what a
  // liveness probe sees (synchronous work on the main thread shows up here).
  const health = pollHealth(agent);
  for (let r = 0; r < rounds; r++) {
    const to = cluster.owners[(r + 1) % 2]!;
    await floor.call('arm', { expect: Object.fromEntries(pods.map((p) => [p.uid, to.uid])) });
    await files.call('arm', { items: pods.map((p) => ({ key: p.uid, dir: p.dir, expected: expectedFile(to) })), quiet: o.quietProbe === true });
    const b0 = nowMs();
    const w = await switchOwners(cluster.api, pods, to);
    burstS.push((nowMs() - b0) / 1000);
    const [fl, fi] = await awaitProbes(floor, files, o.quietProbe === true, WAIT_MS);
    if (fl.missing.length || fi.missing.length) throw new Error(`propagation: floor missed ${fl.missing.length}, files missed ${fi.missing.length}`);
    for (const p of pods) {
      const ret = w.returned.get(p.uid)!;
      // Quiet: the scan's moment means nothing; the file landed at its ctime.
      const at = fi.landed?.[p.uid];
      if (o.quietProbe && at === undefined) throw new Error(`propagation: no ctime for pod ${p.uid}'s file`);
      const got = o.quietProbe ? at! : fi.times[p.uid]!;
      agentMs.push(got - ret);
      floorMs.push(fl.times[p.uid]! - ret);
      addedMs.push(got - fl.times[p.uid]!);
      if (at !== undefined && !o.quietProbe) {
        landedMs.push(at - ret);
        probeLagMs.push(fi.times[p.uid]! - at);
      }
    }
    writeMs.push(...w.writeMs);
  }
  const c1 = sample(agent.pid);
  const during = contention.since();
  const healthzMs = await health.stop();
  const m1 = await agent.metrics();
  const a = dist(agentMs);
  const f = dist(floorMs);
  out.propagation = {
    probe: o.quietProbe ? 'quiet: no watch during the bursts; each file by its ctime' : 'inotify: woken by each event, then the bytes confirmed',
    rounds, events: agentMs.length, burstSeconds: burstS.map((s) => round(s, 2)),
    agentMs: a, floorMs: f, agentMinusFloorMs: dist(addedMs), apiWriteMs: dist(writeMs),
    // The same propagation by the file's ctime (when the rename happened), and how much
    // later the probe saw it: what the measuring process adds to agentMs.
    ...(landedMs.length ? { landedMs: dist(landedMs), probeLagMs: dist(probeLagMs) } : {}),
    ratio: { p50: round(a.p50 / f.p50, 2), p95: round(a.p95 / f.p95, 2), p99: round(a.p99 / f.p99, 2), max: round(a.max / f.max, 2) },
    agentCpuS: round(cpuBetween(c0, c1)),
    agentCpuPerEventUs: round((cpuBetween(c0, c1) * 1e6) / agentMs.length, 1),
    fileWrites: (m1.get('ownerrefs_file_writes_total') ?? 0) - (m0.get('ownerrefs_file_writes_total') ?? 0),
    // Files re-read and found correct: the agent verifying its own writes (dir-watch events).
    diskVerifications: (m1.get('ownerrefs_file_unchanged_total') ?? 0) - (m0.get('ownerrefs_file_unchanged_total') ?? 0),
    // The agent's own view (event received -> renamed), from its histogram, per bucket.
    agentHistogram: diffHistogram(histogram(m1, 'ownerrefs_propagation_seconds'), histogram(m0, 'ownerrefs_propagation_seconds')),
    healthzMs: dist(healthzMs),
    // V8's collections during the bursts, per kind (prom-client's GC histogram): a long
    // major collection stops every event behind it, which is what a tail is made of.
    gc: gcBetween(m0, m1),
    // Per process over the bursts, seconds: on a CPU, and runnable but waiting for one
    // (schedstat), whole process and main thread.
    contention: during,
    samples: { agentMs: agentMs.map((x) => round(x, 2)), floorMs: floorMs.map((x) => round(x, 2)) },
    load: loadavg(),
  };
  const landed = landedMs.length ? dist(landedMs) : undefined;
  const waited = (k: string) => during[k] ? `${(during[k].mainWaitS * 1000).toFixed(0)} ms` : '?';
  say(`N=${n} bursts: main thread runnable but waiting for a CPU: agent ${waited('agent')}, floor ${waited('floor')}; CPU s: ${Object.entries(during).map(([k, v]) => `${k} ${v.cpuS}`).join(', ')}`);
  say(`N=${n} propagation (${agentMs.length} events): agent p50 ${a.p50} p99 ${a.p99} max ${a.max} ms${landed ? ` (by the files' ctime p50 ${landed.p50} p99 ${landed.p99}${landed.n < agentMs.length ? `, ${landed.n} files` : ''})` : ''}; floor p50 ${f.p50} p99 ${f.p99} ms; GC ${JSON.stringify((out.propagation as { gc: unknown }).gc)}`);

  // Unrelated churn: labels and status, never ownerReferences. The probe watches again (it counts the events on the agent's files).
  if (o.quietProbe) await files.call('arm', { items: pods.map((p) => ({ key: p.uid, dir: p.dir, expected: expectedFile(p.owner) })) });
  const churnRounds = Math.max(2, Math.ceil(2000 / n));
  await floor.call('count', { reset: true });
  await files.call('count', { reset: true });
  const w0 = await agent.metric('ownerrefs_file_writes_total');
  const u0 = await agent.metric('ownerrefs_file_unchanged_total');
  const cc0 = sample(agent.pid);
  const ch0 = nowMs();
  for (let r = 0; r < churnRounds; r++) await churn(cluster.api, pods, r);
  const expected = churnRounds * pods.length;
  await waitUntil(async () => ((await floor.call<{ events: number }>('count')).events >= expected), 'floor saw all churn events');
  await waitIdle(agent.pid, o.quietCpuS);
  const cc1 = sample(agent.pid);
  const seen = (await floor.call<{ events: number; bytes: number }>('count')) as { events: number; bytes: number };
  out.churn = {
    rounds: churnRounds, updates: expected, watchEvents: seen.events, avgEventBytes: Math.round(seen.bytes / seen.events),
    seconds: round((nowMs() - ch0) / 1000, 2),
    fileWrites: (await agent.metric('ownerrefs_file_writes_total')) - w0,
    diskVerifications: (await agent.metric('ownerrefs_file_unchanged_total')) - u0,
    inotifyEventsOnAgentFiles: (await files.call<{ events: number }>('count')).events,
    agentCpuS: round(cpuBetween(cc0, cc1)),
    agentCpuPerEventUs: round((cpuBetween(cc0, cc1) * 1e6) / expected, 1),
    load: loadavg(),
  };
  say(`N=${n} churn: ${expected} updates -> ${(out.churn as { fileWrites: number }).fileWrites} file writes, ${(cpuBetween(cc0, cc1) * 1000).toFixed(0)} ms agent CPU`);

  // Memory, CPU and API cost over the agent's whole life.
  const sEnd = sample(agent.pid);
  const heapEnd = heapOf(await agent.metrics());
  const byVerb: Record<string, number> = {};
  for (const [k, v] of await agent.metrics()) {
    const m = /^ownerrefs_api_requests_total\{verb="(\w+)",code="(\w+)"\}$/.exec(k);
    if (m) byVerb[`${m[1]} ${m[2]}`] = v;
  }
  await agent.stop();
  const apf1 = await cluster.agentRequests();
  out.memory = {
    rssAfterStartupMiB: round(sUp.rssMiB, 1), rssEndMiB: round(sEnd.rssMiB, 1), peakRssMiB: round(sEnd.hwmMiB, 1),
    // The peak as it stood after start-up: tells a start-up peak (the first list) from a burst's.
    peakAfterStartupMiB: round(sUp.hwmMiB, 1),
    // V8's heap and Node's external memory, from the agent's own default metrics (prom-client).
    heapAfterStartup: heapUp, heapEnd,
  };
  out.cpu = { agentWholeRunS: round(sEnd.cpuS), agentWholeRunTicksS: round(sEnd.cpuTicksS, 2), threads: sEnd.threads };
  const d0 = procOf(cluster.cp.pids.apiserver);
  const dStart = nowMs();
  await selfGets(cluster.api, pods);
  const d1 = procOf(cluster.cp.pids.apiserver);
  out.api = {
    agentMetric: byVerb,
    agentMetricTotal: Object.values(byVerb).reduce((x, y) => x + y, 0),
    apiServerCounted: apf1 - apf0,
    perPodStart: 0,
    diy: { requests: pods.length, seconds: round((nowMs() - dStart) / 1000, 2), apiserverCpuS: round(d1.cpuS - d0.cpuS) },
  };
  say(`N=${n} memory: ${sUp.rssMiB.toFixed(1)} MiB after start-up (peak so far ${sUp.hwmMiB.toFixed(1)}), ${sEnd.rssMiB.toFixed(1)} at the end, peak ${sEnd.hwmMiB.toFixed(1)}; API: agent ${JSON.stringify(byVerb)}, server counted ${apf1 - apf0}; DIY ${pods.length} GETs`);
  return out;
}

/** V8 heap committed and used, and external (Buffers), in MiB; empty without prom-client's default metrics. */
function heapOf(m: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, name] of [['totalMiB', 'ownerrefs_nodejs_heap_size_total_bytes'], ['usedMiB', 'ownerrefs_nodejs_heap_size_used_bytes'],
    ['externalMiB', 'ownerrefs_nodejs_external_memory_bytes']] as const) {
    const v = m.get(name);
    if (v !== undefined) out[k] = round(v / 2 ** 20, 1);
  }
  for (const [k, v] of m) {
    const hit = /^ownerrefs_nodejs_heap_space_size_total_bytes\{space="(\w+)"\}$/.exec(k);
    if (hit && v > 0) out[`${hit[1]}SpaceMiB`] = round(v / 2 ** 20, 1);
  }
  return out;
}

/** Times /healthz every 50 ms until stopped; returns the response times in ms. */
function pollHealth(agent: AgentProcess): { stop(): Promise<number[]> } {
  const times: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = nowMs();
      try {
        await (await fetch(`http://127.0.0.1:${agent.healthPort}/healthz`)).text();
        times.push(nowMs() - t);
      } catch { /* counted as missing */ }
      await sleep(50);
    }
  })();
  return { async stop() { running = false; await loop; return times; } };
}

function procOf(pid: number | undefined): { cpuS: number } {
  return pid ? sample(pid) : { cpuS: NaN };
}

/** Per GC kind between two scrapes: collections, total ms, and how many took over 10 ms. */
function gcBetween(a: Map<string, number>, b: Map<string, number>): Record<string, { count: number; ms: number; over10ms: number }> {
  const out: Record<string, { count: number; ms: number; over10ms: number }> = {};
  const name = 'ownerrefs_nodejs_gc_duration_seconds';
  for (const [k, v] of b) {
    const hit = new RegExp(`^${name}_(count|sum|bucket)\\{(.*)\\}$`).exec(k);
    const kind = hit && /kind="(\w+)"/.exec(hit[2]!)?.[1];
    if (!hit || !kind) continue;
    const d = v - (a.get(k) ?? 0);
    const e = (out[kind] ??= { count: 0, ms: 0, over10ms: 0 });
    if (hit[1] === 'count') e.count = d;
    else if (hit[1] === 'sum') e.ms = round(d * 1000, 1);
    else if (/le="0\.01"/.test(hit[2]!)) e.over10ms -= d;
  }
  for (const e of Object.values(out)) e.over10ms += e.count;
  return out;
}

function diffHistogram(b: { le: number; count: number }[], a: { le: number; count: number }[]): Record<string, number> {
  const out: Record<string, number> = {};
  let prev = 0;
  for (const x of b) {
    const cum = x.count - (a.find((y) => y.le === x.le)?.count ?? 0);
    out[`le ${x.le === Infinity ? '+Inf' : `${x.le * 1000} ms`}`] = cum - prev;
    prev = cum;
  }
  return out;
}

export async function waitUntil(fn: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = nowMs() + WAIT_MS;
  while (!(await fn())) {
    if (nowMs() > deadline) throw new Error(`gave up waiting for: ${what}`);
    await sleep(20);
  }
}

/** Until the process used < quietS CPU in 250 ms, twice in a row (it finished the backlog). */
async function waitIdle(pid: number, quietS: number): Promise<void> {
  let quiet = 0;
  let last = sample(pid).cpuS;
  const deadline = nowMs() + WAIT_MS;
  while (quiet < 2 && nowMs() < deadline) {
    await sleep(250);
    const now = sample(pid).cpuS;
    quiet = now - last < quietS ? quiet + 1 : 0;
    last = now;
  }
}
