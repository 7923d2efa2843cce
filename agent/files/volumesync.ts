// One sync of one volume of a tracked pod: the step the work queue and a CSI publish
// share. It runs under the directory's lock, so a sync, a publish and an unpublish of
// the same directory never interleave, and records the outcome in the pod table.
//
//   1. Take the files and fingerprint the volume should have now (the pod's, or its own items').
//  1a. Under the lock, unless the disk is to be verified: leave out each file directly in
//      the volume whose bytes, name and mode are those the last sync left, with a stamp
//      recorded: nothing has replaced it since, or its directory event would have asked for
//      a verification (reconciler.ts). An owner change then rewrites the files it changes,
//      not the node file beside them. Files in a subdirectory (nested downwardAPI items) are
//      always written: the directory watch sees only the volume's own entries.
//   2. Under the directory's lock: writer.sync (verify the disk first when asked;
//      create the target's last directory for a CSI publish).
//   3. Still under the lock, if the pod is still tracked: record the fingerprint, the
//      files and the stamps the write left (the left-out files keep theirs; a file the
//      writer kept by its KeepRule is recorded with the bytes in place, so a settled answer
//      equal to them is not written again), so a later sync of the same directory sees
//      them; on failure record that the volume's disk state is unknown (verified next time).
//   4. Count the files written and found correct (a left-out file is neither).
//  A failure comes back as a ProjectionError carrying the pod and the volume.

import type { Clock } from '../common/clock.ts';
import { ProjectionError } from '../common/errors.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import type { DirLocks } from './volume/dirlocks.ts';
import type { ResolvedVolume } from './volume/resolve.ts';
import type { SyncResult, VolumeWriter } from './volume/writer.ts';
import type { ProjectedFile } from '../../projections/index.ts';
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
    const all = filesFor(t, v.name); // step 1
    const fingerprint = fingerprintFor(t, v.name);
    // Files turned off by node labels are the agent's own set; a volume of items never had them.
    const remove = hasOwnFiles(t, v.name) ? [] : opts.remove;
    try {
      const r = await this.#locks.run(dirOf(v.target), async () => {
        const tracked = () => this.#table.get(uid) === t;
        // Step 1a under the lock: a sync of the same directory just before (a CSI publish) has recorded what it left.
        const kept = opts.verify ? {} : keptStamps(all, t.left.get(v.name), t.stamps.get(v.name));
        const files = Object.keys(kept).length === 0 ? all : all.filter((f) => kept[f.path] === undefined);
        try {
          const written = await this.#writer.sync(v.target, files, remove, { verify: opts.verify, createTarget: opts.createTarget ?? false }); // step 2
          if (tracked()) this.#table.synced(t, v.name, fingerprint, leftBy(all, written.kept), { ...kept, ...written.stamps }); // step 3
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

/**
 * Step 1a: file name -> recorded stamp, for each of `files` directly in the volume that is
 * byte for byte one the last sync left (`left`) and has a stamp from it. Empty when there
 * was no such sync.
 */
export function keptStamps(files: readonly ProjectedFile[], left: readonly ProjectedFile[] | undefined,
  stamps: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const kept: Record<string, string> = {};
  if (!left || !stamps) return kept;
  const before = new Map(left.map((f) => [f.path, f]));
  for (const f of files) {
    if (f.path.includes('/')) continue; // nested: no directory event would tell us of a change
    const old = before.get(f.path);
    const stamp = stamps[f.path];
    if (old && stamp !== undefined && old.mode === f.mode && old.bytes.equals(f.bytes)) kept[f.path] = stamp;
  }
  return kept;
}

/** Step 3: the files as they now are on disk: a kept file holds the bytes that were there. */
function leftBy(files: readonly ProjectedFile[], kept: Readonly<Record<string, Buffer>>): readonly ProjectedFile[] {
  if (Object.keys(kept).length === 0) return files;
  return files.map((f) => {
    const bytes = kept[f.path];
    return bytes ? { path: f.path, bytes, mode: f.mode } : f;
  });
}
