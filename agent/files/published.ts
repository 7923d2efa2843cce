// Targets that do not come from a pod's annotation: CSI volumes the kubelet publishes
// (agent/files/csi/ speaks the protocol; this is what a publish means for the pod table).
//
// Keys are on-disk pod UIDs (the directory name under <kubelet>/pods): that is what a
// CSI target path and the kubelet's volume context carry, and for a static pod it is
// not the mirror pod's metadata.uid.
//
// Lifecycle of one target:
//   publish   the pod must be tracked (waitForPod first): the target joins the pod's
//             volumes, its files are written before the answer (the last directory is
//             created), and from then on it is kept current like any volume. A failed
//             write takes it out again, so the kubelet's retry starts clean.
//   adopt     a target found published after a restart: kept current, not written now.
//   unpublish the target leaves the pod's volumes first (no sync can start on it), then
//             the agent's files and the directory are removed under the directory's lock
//             (a sync in flight finishes first).

import type { Clock } from '../common/clock.ts';
import type { ProjectionError } from '../common/errors.ts';
import { ALL_FILE_NAMES } from '../../projections/index.ts';
import type { DirLocks } from './volume/dirlocks.ts';
import type { ResolvedVolume } from './volume/resolve.ts';
import type { VolumeTarget, VolumeWriter } from './volume/writer.ts';
import { dirOf, filesFor, podKey, refusedIn, type PodTable, type Tracked } from './podtable.ts';
import type { VolumeSync } from './volumesync.ts';

export interface PublishedDeps {
  table: PodTable;
  sync: VolumeSync;
  writer: VolumeWriter;
  locks: DirLocks;
  clock: Clock;
  /** Files to delete rather than write (node labels turned them off). */
  removals(): string[];
  /** A failed publish, reported on the pod like any projection failure. */
  report(t: Tracked, e: ProjectionError): void;
}

export class PublishedTargets {
  readonly #d: PublishedDeps;
  /** On-disk pod UID -> volume name -> target, and which adoption put it there. */
  readonly #targets = new Map<string, Map<string, { target: VolumeTarget; adoption: number }>>();
  #adoptions = 0;
  readonly #waiters = new Map<string, Set<(arrived: boolean) => void>>();

  constructor(deps: PublishedDeps) {
    this.#d = deps;
  }

  /** True when some target of this pod directory is published: the pod is tracked without the annotation. */
  has(diskUid: string): boolean {
    return this.#targets.has(diskUid);
  }

  volumes(diskUid: string): ResolvedVolume[] {
    return [...this.#targets.get(diskUid) ?? []].map(([name, { target }]) => ({ name, target }));
  }

  /** Resolves true once a pod with this on-disk UID is tracked (at once if it is), false after `ms`. */
  waitForPod(diskUid: string, ms: number): Promise<boolean> {
    if (this.#d.table.onDisk(diskUid)) return Promise.resolve(true);
    return new Promise((resolve) => {
      let set = this.#waiters.get(diskUid);
      if (!set) this.#waiters.set(diskUid, (set = new Set()));
      const done = (arrived: boolean) => {
        cancel();
        set.delete(done);
        if (set.size === 0 && this.#waiters.get(diskUid) === set) this.#waiters.delete(diskUid);
        resolve(arrived);
      };
      set.add(done);
      const cancel = this.#d.clock.setTimer(() => done(false), ms);
    });
  }

  /** The reconciler tracked a pod with this on-disk UID. */
  arrived(diskUid: string): void {
    for (const done of [...this.#waiters.get(diskUid) ?? []]) done(true);
  }

  /**
   * Writes the pod's files into `target` and keeps them current from then on. Resolves
   * once they are on disk; false if no such pod is tracked. Writes even while the node is
   * paused: a new volume has no files to leave as they are.
   */
  async publish(diskUid: string, volume: string, target: VolumeTarget): Promise<boolean> {
    const found = this.#d.table.onDisk(diskUid);
    if (!found) return false;
    const { uid, t } = found;
    if (t.refused) throw t.refused.withContext({ pod: podKey(t), volume });
    const refused = refusedIn(t, volume);
    if (refused) throw refused.withContext({ pod: podKey(t), volume }); // reported on the pod at upsert
    const republish = this.#targets.get(diskUid)?.has(volume) ?? false;
    const adoption = this.#adopt(diskUid, volume, target);
    try {
      await this.#d.sync.run(uid, t, { name: volume, target }, { verify: true, remove: this.#d.removals(), createTarget: true });
    } catch (err) {
      // A target kept from before stays kept; so does one a later publish adopted meanwhile
      // (the kubelet retrying after its deadline while this write hung).
      if (!republish && this.#targets.get(diskUid)?.get(volume)?.adoption === adoption) this.#forget(diskUid, volume);
      this.#d.report(t, err as ProjectionError); // VolumeSync throws ProjectionErrors only
      throw err;
    }
    return true;
  }

  /** Keep `target` current without writing now (a target found published after a restart). */
  adopt(diskUid: string, volume: string, target: VolumeTarget): void {
    this.#adopt(diskUid, volume, target);
  }

  #adopt(diskUid: string, volume: string, target: VolumeTarget): number {
    let m = this.#targets.get(diskUid);
    if (!m) this.#targets.set(diskUid, (m = new Map()));
    const adoption = ++this.#adoptions;
    m.set(volume, { target, adoption });
    this.#refresh(diskUid);
    return adoption;
  }

  /** Stops updating `target`, then removes the files the agent wrote there and the directory. */
  async unpublish(diskUid: string, volume: string, target: VolumeTarget): Promise<string[]> {
    // Every file of ours in the target goes (the writer's step 10a), not only the names the
    // pod's items have now: the pod may be gone (deleted first, or not listed since a
    // restart), or its items refused since the publish (its author grew an annotation past
    // --max-bytes), and the files written before would make the kubelet's unpublish fail
    // forever, the pod stuck Terminating. The target is the agent's, mounted read-only.
    const t = this.#d.table.onDisk(diskUid)?.t;
    const names = [...new Set([...ALL_FILE_NAMES, ...(t ? filesFor(t, volume).map((f) => f.path) : [])])];
    this.#forget(diskUid, volume);
    return (await this.#d.locks.run(dirOf(target), () => this.#d.writer.clear(target, names, { sweep: true }))).removed;
  }

  /** Shutting down: nobody should keep waiting. */
  close(): void {
    for (const set of [...this.#waiters.values()]) for (const done of [...set]) done(false);
  }

  #forget(diskUid: string, volume: string): void {
    const m = this.#targets.get(diskUid);
    m?.delete(volume);
    if (m?.size === 0) this.#targets.delete(diskUid);
    this.#refresh(diskUid);
  }

  #refresh(diskUid: string): void {
    const found = this.#d.table.onDisk(diskUid);
    if (found) this.#d.table.setVolumes(found.uid, found.t, found.t.annotated, this.volumes(diskUid));
  }
}
