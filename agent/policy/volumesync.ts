// One sync of one volume of a tracked pod: the step the work queue and a CSI publish
// share. It runs under the directory's lock, so a sync, a publish and an unpublish of
// the same directory never interleave, and records the outcome in the pod table.
//
//   1. Take the files and fingerprint the volume should have now (the pod's, or its own items').
//   2. Under the directory's lock: writer.sync (verify the disk first when asked;
//      create the target's last directory for a CSI publish).
//   3. Still under the lock, if the pod is still tracked: record the fingerprint and the
//      stamps the write left, so a later sync of the same directory sees them; on
//      failure record that the volume's disk state is unknown (verified next time).
//   4. Count the files written and found correct.
//  A failure comes back as a ProjectionError carrying the pod and the volume.

import type { Clock } from '../common/clock.ts';
import { ProjectionError } from '../common/errors.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import type { DirLocks } from '../volume/dirlocks.ts';
import type { ResolvedVolume } from '../volume/resolve.ts';
import type { SyncResult, VolumeWriter } from '../volume/writer.ts';
import { dirOf, filesFor, fingerprintFor, hasOwnFiles, podKey, type PodTable, type Tracked } from './podtable.ts';

export interface VolumeSyncResult extends SyncResult {
  /** The fingerprint of the files this sync left (the pod may have moved on since). */
  fingerprint: string;
}

export class VolumeSync {
  readonly #table: PodTable;
  readonly #writer: VolumeWriter;
  readonly #locks: DirLocks;
  readonly #metrics: Pick<AgentMetrics, 'fileWrites' | 'fileUnchanged' | 'lastSync'>;
  readonly #clock: Clock;

  constructor(deps: { table: PodTable; writer: VolumeWriter; locks: DirLocks; metrics: AgentMetrics; clock: Clock }) {
    this.#table = deps.table;
    this.#writer = deps.writer;
    this.#locks = deps.locks;
    this.#metrics = deps.metrics;
    this.#clock = deps.clock;
  }

  async run(uid: string, t: Tracked, v: ResolvedVolume, opts: { verify: boolean; remove: readonly string[]; createTarget?: boolean }): Promise<VolumeSyncResult> {
    const files = filesFor(t, v.name); // step 1
    const fingerprint = fingerprintFor(t, v.name);
    // Files turned off by node labels are the agent's own set; a volume of items never had them.
    const remove = hasOwnFiles(t, v.name) ? [] : opts.remove;
    try {
      const r = await this.#locks.run(dirOf(v.target), async () => {
        const tracked = () => this.#table.get(uid) === t;
        try {
          const written = await this.#writer.sync(v.target, files, remove, { verify: opts.verify, createTarget: opts.createTarget ?? false }); // step 2
          if (tracked()) this.#table.synced(t, v.name, fingerprint, written.stamps); // step 3
          return written;
        } catch (err) {
          if (tracked()) this.#table.unknown(t, v.name);
          throw err;
        }
      });
      this.#metrics.fileWrites.inc(r.written.length); // step 4
      this.#metrics.fileUnchanged.inc(r.unchanged.length);
      this.#metrics.lastSync.set(this.#clock.now() / 1000);
      return { ...r, fingerprint };
    } catch (err) {
      const context = { pod: podKey(t), volume: v.name };
      throw err instanceof ProjectionError ? err.withContext(context) : new ProjectionError('WriteFailed', String(err), context, err);
    }
  }
}
