// Bookkeeping for targets that do not come from a pod's annotation: CSI volumes the
// kubelet published (agent/csi/). Kept apart from the reconciler's policy so that the
// reconciler only asks "which extra targets does this pod have?".
//
// Keys are on-disk pod UIDs (the directory name under <kubelet>/pods): that is what a
// CSI target path and the kubelet's volume context carry, and for a static pod it is
// not the mirror pod's metadata.uid.

import type { Clock } from '../common/clock.ts';
import type { ResolvedVolume } from '../volume/resolve.ts';
import type { VolumeTarget } from '../volume/writer.ts';

export class ExtraTargets {
  readonly #targets = new Map<string, Map<string, VolumeTarget>>();
  readonly #waiters = new Map<string, Set<(arrived: boolean) => void>>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  has(diskUid: string): boolean {
    return this.#targets.has(diskUid);
  }

  volumes(diskUid: string): ResolvedVolume[] {
    return [...this.#targets.get(diskUid) ?? []].map(([name, target]) => ({ name, target }));
  }

  set(diskUid: string, volume: string, target: VolumeTarget): void {
    let m = this.#targets.get(diskUid);
    if (!m) this.#targets.set(diskUid, (m = new Map()));
    m.set(volume, target);
  }

  delete(diskUid: string, volume: string): void {
    const m = this.#targets.get(diskUid);
    m?.delete(volume);
    if (m?.size === 0) this.#targets.delete(diskUid);
  }

  /** Resolves true when arrived(diskUid) is called within `ms`, false otherwise. */
  wait(diskUid: string, ms: number): Promise<boolean> {
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
      const cancel = this.#clock.setTimer(() => done(false), ms);
    });
  }

  arrived(diskUid: string): void {
    for (const done of [...this.#waiters.get(diskUid) ?? []]) done(true);
  }

  /** Shutting down: nobody should keep waiting. */
  close(): void {
    for (const set of [...this.#waiters.values()]) for (const done of [...set]) done(false);
  }
}

/**
 * Runs operations on one directory one at a time. The work queue already runs one sync
 * per pod at a time; CSI publish and unpublish arrive from outside it, and an unpublish
 * must not remove files while a sync of the same directory is half way through.
 */
export class DirLocks {
  readonly #tails = new Map<string, Promise<void>>();

  run<T>(dir: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.#tails.get(dir) ?? Promise.resolve()).then(fn);
    const tail = run.then(() => undefined, () => undefined);
    this.#tails.set(dir, tail);
    void tail.then(() => {
      if (this.#tails.get(dir) === tail) this.#tails.delete(dir);
    });
    return run;
  }
}
