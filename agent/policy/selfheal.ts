// SelfHeal: puts back what changed under the agent in a volume. Directory events
// (volume/dirwatch.ts) and the periodic resync arrive here; the repair itself is a
// verifying sync, queued like any other.
//
//   appeared(dir)       the target exists (also reported when a watch is set up on an
//                       existing directory): verified unless the agent's files are intact
//   changed(dir, name)  an entry changed. Every rename the agent makes comes back as such
//                       an event: its stamp (one lstat) matches the one the write left, and
//                       nothing is read again. Anything else (deleted, replaced, rewritten in
//                       place) marks the volume for verification and queues its pod.
//   resyncAll()         every tracked volume verified: the backstop for missed events
//                       (an inotify queue overflow, a watch that could not be set up)

import { FILES } from '../../projections/index.ts';
import type { DirWatchEvents } from '../volume/dirwatch.ts';
import type { DirLocks } from '../volume/dirlocks.ts';
import type { VolumeWriter } from '../volume/writer.ts';
import { filesFor, type PodTable } from './podtable.ts';
import type { WorkQueue } from './queue.ts';

export interface SelfHealOptions {
  /**
   * The pod table. A thunk because the table watches directories through the watcher that
   * reports here, so it is built after this.
   */
  table: () => PodTable;
  queue: Pick<WorkQueue, 'add'>;
  /** The reconciler's: a stamp is judged after any sync of the same directory in flight. */
  locks: DirLocks;
  writer: Pick<VolumeWriter, 'stampOf'>;
}

export class SelfHeal implements DirWatchEvents {
  readonly #o: SelfHealOptions;

  constructor(opts: SelfHealOptions) {
    this.#o = opts;
  }

  appeared(dir: string): void {
    const at = this.#o.table().atDir(dir);
    const own = at && at.t.volumeFiles.has(at.volume) ? filesFor(at.t, at.volume)[0]?.path : undefined;
    this.#verifyUnlessOurs(dir, own ?? FILES.ownerReferences);
  }

  changed(dir: string, name: string): void {
    this.#verifyUnlessOurs(dir, name);
  }

  resyncAll(): void {
    const table = this.#o.table();
    for (const [uid, t] of table.entries()) {
      table.verify(t);
      this.#o.queue.add(uid);
    }
  }

  #verifyUnlessOurs(dir: string, name: string): void {
    const at = this.#o.table().atDir(dir);
    const v = at?.t.volumes.find((x) => x.name === at.volume);
    if (!at || !v || !filesFor(at.t, at.volume).some((f) => f.path === name)) return; // not a file we keep there
    const { t } = at;
    // Under the directory's lock: an event for a rename still in flight is judged after
    // that sync has recorded its stamps.
    void this.#o.locks.run(dir, async () => {
      const ours = t.stamps.get(at.volume)?.[name];
      if (!ours || (await this.#o.writer.stampOf(v.target, name)) !== ours) this.#verify(dir);
    });
  }

  #verify(dir: string): void {
    const table = this.#o.table();
    const at = table.atDir(dir);
    if (!at) return;
    table.verify(at.t, at.volume);
    this.#o.queue.add(at.uid);
  }
}
