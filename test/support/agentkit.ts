// A Reconciler wired to real parts (FsVolumeWriter, chokidar) on a temporary
// kubelet root, with recording Events and an in-memory log, for unit tests of
// the agent's policy without an API server.

import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach } from 'vitest';
import { VolumeDirWatcher } from '../../agent/files/volume/dirwatch.ts';
import type { EventSink, InvolvedObject } from '../../agent/kube/events.ts';
import type { OwnerMetadataCache } from '../../agent/owners/ownermeta.ts';
import { AgentMetrics } from '../../agent/monitoring/metrics.ts';
import { Reconciler } from '../../agent/files/reconciler.ts';
import { FsVolumeWriter, TEMP_PREFIX, type VolumeWriter } from '../../agent/files/volume/writer.ts';
import type { Clock } from '../../agent/common/clock.ts';
import { tmpDir } from './tmpdir.ts';

export interface RecordedEvent {
  obj: InvolvedObject;
  reason: string;
  message: string;
}

export class RecordingEvents implements EventSink {
  readonly sent: RecordedEvent[] = [];
  warn(obj: InvolvedObject, reason: string, message: string): boolean {
    this.sent.push({ obj, reason, message });
    return true;
  }
}

export function memoryLogger() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

const open: Reconciler[] = [];
afterEach(async () => {
  for (const r of open.splice(0)) await r.close();
});

/** `root`: an existing kubelet root (a restarted agent); default a fresh one. */
export function agentKit(opts: { maxBytes?: number; events?: EventSink; csiDriver?: string; root?: string; owners?: Pick<OwnerMetadataCache, 'lookup'>;
  writer?: VolumeWriter; clock?: Clock } = {}) {
  const root = opts.root ?? tmpDir('kubelet-');
  const events = new RecordingEvents();
  const { log, lines } = memoryLogger();
  const metrics = new AgentMetrics({ processMetrics: false });
  const reconciler = new Reconciler({
    kubeletRoot: root,
    writer: opts.writer ?? new FsVolumeWriter(),
    ...(opts.clock ? { clock: opts.clock } : {}),
    events: opts.events ?? events,
    log,
    metrics,
    ...(opts.maxBytes ? { maxBytes: opts.maxBytes } : {}),
    ...(opts.csiDriver ? { csiDriver: opts.csiDriver } : {}),
    ...(opts.owners ? { owners: opts.owners } : {}),
    dirs: (on) => new VolumeDirWatcher(root, on, (err) => log.error({ err }, 'watch error'), (n) => n.startsWith(TEMP_PREFIX)),
  });
  open.push(reconciler);
  const counter = async (name: string) =>
    (await metrics.registry.getSingleMetric(name)?.get())?.values.reduce((n, v) => n + v.value, 0) ?? 0;
  return { root, reconciler, events, lines, log, metrics, writes: () => counter('ownerrefs_file_writes_total'), gauge: counter };
}
