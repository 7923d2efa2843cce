// SelfHeal: puts back what changed under the agent in a volume. Directory events
// (volume/dirwatch.ts) and the periodic resync arrive here; the repair itself is a
// verifying sync, queued like any other.
//
//   appeared(dir)       the target exists (also reported when a watch is set up on an
//                       existing directory): verified unless the agent's files are intact
//   changed(dir, name)  an entry changed. The name is noted and the directory checked on a
//                       later turn of the event loop, once for all the names noted meanwhile
//                       (one check per directory at a time). Every rename the agent makes
//                       comes back as such an event: its stamp (one lstat) matches the one
//                       the write left, and nothing is read again. Anything else (deleted,
//                       replaced, rewritten in place) marks the volume for verification and
//                       queues its pod: at most HEAL_LIMIT repairs per pod, and never ahead
//                       of a failure's backoff.
//   resyncAll()         every tracked volume verified: the backstop for missed events
//                       (an inotify queue overflow, a watch that could not be set up)

import { FILES } from '../../projections/index.ts';
import { realClock, type Clock } from '../common/clock.ts';
import { HEAL_LIMIT } from '../common/defaults.ts';
import { KeyedRateLimiter } from '../common/ratelimit.ts';
import type { DirWatchEvents } from './volume/dirwatch.ts';
import type { DirLocks } from './volume/dirlocks.ts';
import type { VolumeWriter } from './volume/writer.ts';
import { filesFor, type PodTable } from './podtable.ts';
import type { WorkQueue } from '../common/queue.ts';

export interface SelfHealOptions {
  /**
   * The pod table. A thunk because the table watches directories through the watcher that
   * reports here, so it is built after this.
   */
  table: () => PodTable;
  queue: Pick<WorkQueue, 'add' | 'addIfIdle' | 'addAfter' | 'retrying'>;
  /** The reconciler's: a stamp is judged after any sync of the same directory in flight. */
  locks: DirLocks;
  writer: Pick<VolumeWriter, 'stampOf'>;
  clock?: Clock;
  /** Repairs per pod: a burst, then one per refillMs (default HEAL_LIMIT). */
  limit?: { burst: number; refillMs: number };
}

export class SelfHeal implements DirWatchEvents {
  readonly #o: SelfHealOptions;
  readonly #limit: { burst: number; refillMs: number };
  readonly #repairs: KeyedRateLimiter;
  /** Directory -> names whose events wait for their check. */
  readonly #waiting = new Map<string, Set<string>>();
  /** Directories with a check scheduled or running: one at a time each. */
  readonly #checking = new Set<string>();

  constructor(opts: SelfHealOptions) {
    this.#o = opts;
    this.#limit = opts.limit ?? HEAL_LIMIT;
    this.#repairs = new KeyedRateLimiter({ ...this.#limit, clock: opts.clock ?? realClock });
  }

  appeared(dir: string): void {
    const at = this.#o.table().atDir(dir);
    const own = at && at.t.volumeFiles.has(at.volume) ? filesFor(at.t, at.volume)[0]?.path : undefined;
    this.changed(dir, own ?? FILES.ownerReferences);
  }

  /**
   * Called from inside the watcher's event delivery, once per inotify event: it only notes
   * the name and returns. A pod can make events far faster than any check; judging each
   * on the spot (synchronous calls on tmpfs) held the event loop for as long as it wanted.
   */
  changed(dir: string, name: string): void {
    const at = this.#o.table().atDir(dir);
    if (!at || !filesFor(at.t, at.volume).some((f) => f.path === name)) return; // not a file we keep there
    let names = this.#waiting.get(dir);
    if (!names) this.#waiting.set(dir, (names = new Set()));
    names.add(name);
    if (this.#checking.has(dir)) return;
    this.#checking.add(dir);
    setImmediate(() => void this.#check(dir));
  }

  resyncAll(): void {
    const table = this.#o.table();
    for (const [uid, t] of table.entries()) {
      table.verify(t);
      this.#o.queue.add(uid);
    }
  }

  /** One check of a directory's waiting names: a repair if any is not what the agent left. */
  async #check(dir: string): Promise<void> {
    const names = this.#waiting.get(dir) ?? new Set<string>();
    this.#waiting.delete(dir);
    try {
      // Under the directory's lock: an event for a rename still in flight is judged after
      // that sync has recorded its stamps.
      await this.#o.locks.run(dir, async () => {
        const at = this.#o.table().atDir(dir);
        const v = at?.t.volumes.find((x) => x.name === at.volume);
        if (!at || !v) return; // untracked meanwhile
        // A repair is asked for and its run is on a timer already: nothing to judge (a flood of
        // events from a pod rate-limited a moment ago costs no lstat each).
        if (at.t.verify.has(at.volume) && this.#o.queue.retrying(at.uid)) return;
        for (const name of names) {
          const ours = at.t.stamps.get(at.volume)?.[name];
          if (!ours || (await this.#o.writer.stampOf(v.target, name)) !== ours) return this.#repair(dir);
        }
      });
    } finally {
      if (this.#waiting.has(dir)) setImmediate(() => void this.#check(dir));
      else this.#checking.delete(dir);
    }
  }

  /**
   * Verify the volume at its pod's next sync. A pod waiting out a failure's backoff is left
   * to its retry, and a pod that keeps undoing the agent's files is repaired at most
   * HEAL_LIMIT's rate: the rest of the node must not pay for it.
   */
  #repair(dir: string): void {
    const table = this.#o.table();
    const at = table.atDir(dir);
    if (!at) return;
    table.verify(at.t, at.volume);
    if (this.#o.queue.retrying(at.uid)) return;
    if (this.#repairs.take(at.uid) === null) this.#o.queue.addAfter(at.uid, this.#limit.refillMs);
    else this.#o.queue.addIfIdle(at.uid); // during a run: after it, unless it failed (its retry verifies)
  }
}
