// Where the agent's time goes per pod event, without the API server: the agent's own
// Reconciler, FsVolumeWriter and VolumeDirWatcher on a real temporary kubelet root,
// fed N pods and then a burst of N owner changes, in this process. Run with the
// directory watcher on (as shipped) and replaced by a no-op, to separate the cost of
// writing from the cost of reacting to the agent's own writes.
//
//   node --expose-gc --max-semi-space-size=1 --no-opt --no-maglev --memory-saver-mode bench/pipeline.ts [N ...] [watch|none]   (default 100 1000, both)
//
// With the writer on libuv's thread pool for tmpfs too (the bench's "poolfs" what-if):
//   OWNERREFS_BENCH_SHIMS=poolfs node --import ./bench/variants/hook.ts --expose-gc --max-semi-space-size=1 --no-opt --no-maglev --memory-saver-mode bench/pipeline.ts

import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { VolumeDirWatcher } from '../agent/files/volume/dirwatch.ts';
import { AgentMetrics } from '../agent/monitoring/metrics.ts';

import { Reconciler } from '../agent/files/reconciler.ts';
import { FsVolumeWriter } from '../agent/files/volume/writer.ts';
import { type PodView } from '../agent/node/podview.ts';

// Numbers are sizes; "watch" or "none" runs only that watcher (one per process gives
// clean RSS figures: RSS does not shrink back between runs in one process).
const args = process.argv.slice(2);
const sizes = args.filter((a) => /^\d+$/.test(a)).map(Number);
const only = args.find((a) => a === 'watch' || a === 'none');
const shims = process.env.OWNERREFS_BENCH_SHIMS ?? '';

function pod(i: number, ownerUid: string, rv: number): PodView {
  return {
    metadata: {
      name: `p-${i}`, namespace: 'bench', uid: `uid-${i}`, resourceVersion: String(rv),
      annotations: { 'ownerrefs.dev/volume': 'podinfo' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: ownerUid, controller: true }],
    },
    spec: { volumes: [{ name: 'podinfo', emptyDir: process.env.OWNERREFS_BENCH_ROOT ? {} : { medium: 'Memory' } }] },
  } as PodView;
}

function memory(): { heap: number; external: number; rss: number } {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, external: m.external + m.arrayBuffers, rss: m.rss };
}

async function counter(m: AgentMetrics, name: 'fileWrites' | 'fileUnchanged'): Promise<number> {
  return (await m[name].get()).values.reduce((n, v) => n + v.value, 0);
}

/** Settled: the queue is idle and stays idle across a pause (late watcher events included). */
async function settle(r: Reconciler): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await r.idle();
    await sleep(300);
  }
  await r.idle();
}

async function run(n: number, watcher: boolean): Promise<Record<string, number | string>> {
  // tmpfs and medium: Memory, like the bench's volumes; OWNERREFS_BENCH_ROOT=/tmp for a disk-backed emptyDir.
  const root = mkdtempSync(path.join(process.env.OWNERREFS_BENCH_ROOT ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()), 'ownerrefs-pipeline-'));
  try {
    for (let i = 0; i < n; i++) mkdirSync(path.join(root, 'pods', `uid-${i}`, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'), { recursive: true, mode: 0o777 });
    const metrics = new AgentMetrics({ processMetrics: false });
    const r = new Reconciler({
      kubeletRoot: root, writer: new FsVolumeWriter(), events: { warn: () => true }, log: pino({ level: 'silent' }), metrics,
      dirs: watcher
        ? (on) => new VolumeDirWatcher(root, on, () => {})
        : () => ({ watch() {}, unwatch() {}, async close() {} }),
    });
    const mem0 = memory();
    r.replace(Array.from({ length: n }, (_, i) => pod(i, 'owner-a', 1)));
    await settle(r);
    const mem1 = memory();
    const w0 = await counter(metrics, 'fileWrites');
    const v0 = await counter(metrics, 'fileUnchanged');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) r.upsert(pod(i, 'owner-b', 2));
    await r.idle();
    const drainedMs = performance.now() - t0;
    await settle(r); // the watcher's reaction to our own writes arrives after the drain
    const cpu = process.cpuUsage(c0);
    const out = {
      n, dirWatcher: watcher ? 'VolumeDirWatcher (as shipped)' : 'none', ...(shims ? { shims } : {}),
      burstDrainedMs: Math.round(drainedMs),
      cpuPerEventUs: Math.round((cpu.user + cpu.system) / n),
      userUs: Math.round(cpu.user / n), systemUs: Math.round(cpu.system / n),
      fileWritesPerEvent: ((await counter(metrics, 'fileWrites')) - w0) / n,
      filesReverifiedPerEvent: ((await counter(metrics, 'fileUnchanged')) - v0) / n,
      // Memory the tracked pods hold (after a full GC when run with --expose-gc).
      heapPerPodKiB: Math.round((mem1.heap - mem0.heap) / n / 1024 * 10) / 10,
      externalPerPodKiB: Math.round((mem1.external - mem0.external) / n / 1024 * 10) / 10,
      rssPerPodKiB: Math.round((mem1.rss - mem0.rss) / n / 1024 * 10) / 10,
    };
    await r.close();
    return out;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const rows: Record<string, number | string>[] = [];
for (const n of sizes.length ? sizes : [100, 1000]) {
  for (const watcher of [true, false]) {
    if (only === undefined || only === (watcher ? 'watch' : 'none')) rows.push(await run(n, watcher));
  }
}
console.table(rows);
process.stdout.write(`${JSON.stringify(rows)}\n`);
