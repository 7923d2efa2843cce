// Watches volume directories: tells the agent when a directory the kubelet creates
// appears (so files land within a second of it), and when an entry in it changes or
// goes away (so the agent restores its files: self-heal).
//
// Two mechanisms, each where it is good:
// - A target that does not exist yet is watched through its deepest existing ancestor
//   with chokidar (depth 0, symlinks not followed), and the watch moves down one level
//   each time the next component appears. Few targets are pending at a time.
// - An existing target gets one plain inotify watch (fs.watch, depth 0) and its events
//   go straight to the agent, which filters names and compares stamps itself. chokidar
//   costs about 95 KiB of RSS and a few stat calls per event per directory; at 1,000
//   volumes that was a third of the agent's memory and most of its CPU
//   (docs/PERFORMANCE.md).
// Neither follows symlinks, and inotify holds no file descriptor in the directory.
//
// chokidar arms a watch asynchronously, so a directory created between our lstat and
// the watch being live would be missed: a pending target is re-checked shortly after
// each move, and then every PENDING_RECHECK_MS.

import { watch as fsWatch, type FSWatcher as FsWatcher } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { watch, type FSWatcher } from 'chokidar';

export interface DirWatchEvents {
  /** The target directory now exists (also when it existed on watch()). */
  appeared(dir: string): void;
  /** An entry named `name` directly inside the target changed, appeared or went away. */
  changed(dir: string, name: string): void;
}

/** The seam the agent uses. */
export interface DirWatcher {
  watch(dir: string): void;
  unwatch(dir: string): void;
  close(): Promise<void>;
}

const SETTLE_RECHECK_MS = [100, 1_000];
const PENDING_RECHECK_MS = 5_000;

export class VolumeDirWatcher implements DirWatcher {
  readonly #pending: FSWatcher;
  readonly #root: string;
  readonly #on: DirWatchEvents;
  readonly #onError: (err: unknown) => void;
  readonly #ignoreName: (name: string) => boolean;
  readonly #watchDir: typeof fsWatch;
  /** target -> the ancestor watched on its behalf while it is missing, or itself once it exists. */
  readonly #targets = new Map<string, string>();
  /** watched ancestor -> the pending targets below it (indexes events: no scan of all targets). */
  readonly #users = new Map<string, Set<string>>();
  /** existing target -> its inotify watch. */
  readonly #live = new Map<string, FsWatcher>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #pendingCheck: NodeJS.Timeout;
  /**
   * Targets with a #checkGone in flight: one at a time (an entry named like the volume would
   * start one per event), and whether another was asked for meanwhile (it runs after).
   */
  readonly #checking = new Map<string, boolean>();
  /** Existing targets whose inotify watch could not be set up (ENOSPC: the node's watches ran out), retried. */
  readonly #unwatched = new Set<string>();
  /** Targets whose watch failed with another error, already logged. */
  readonly #erred = new Set<string>();
  #closed = false;

  /**
   * `root`: absolute; targets are below it and it always exists (the kubelet root).
   * `ignoreName`: entry names not worth an event (the writer's temporaries).
   * `watchDir`: sets up an inotify watch (node:fs's watch; tests make it fail as a node out of watches does).
   */
  constructor(root: string, on: DirWatchEvents, onError: (err: unknown) => void, ignoreName: (name: string) => boolean = () => false,
    watchDir: typeof fsWatch = fsWatch) {
    this.#root = root;
    this.#on = on;
    this.#onError = onError;
    this.#ignoreName = ignoreName;
    this.#watchDir = watchDir;
    this.#pending = watch([], { depth: 0, followSymlinks: false, ignoreInitial: true, atomic: false, persistent: false });
    this.#pending.on('all', (ev, p) => this.#ancestorEvent(ev, path.resolve(p)));
    this.#pending.on('error', onError);
    this.#pendingCheck = setInterval(() => {
      for (const [target, at] of this.#targets) if (at !== target) void this.#settle(target);
    }, PENDING_RECHECK_MS).unref();
  }

  watch(dir: string): void {
    const target = path.resolve(dir);
    if (this.#targets.has(target)) return;
    this.#targets.set(target, '');
    void this.#settle(target);
  }

  unwatch(dir: string): void {
    const target = path.resolve(dir);
    const at = this.#targets.get(target);
    this.#targets.delete(target);
    if (at) this.#release(at, target);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#pendingCheck);
    for (const t of this.#timers) clearTimeout(t);
    for (const w of this.#live.values()) w.close();
    this.#live.clear();
    await this.#pending.close();
  }

  /** Move the target's watch to itself if it exists, else to its deepest existing ancestor. */
  async #settle(target: string): Promise<void> {
    const at = await deepestExisting(target, this.#root);
    const prev = this.#targets.get(target);
    if (prev === undefined || this.#closed) return; // unwatched meanwhile
    if (prev !== at) {
      this.#targets.set(target, at);
      this.#acquire(at, target);
      if (prev) this.#release(prev, target);
      if (at !== target) for (const ms of SETTLE_RECHECK_MS) this.#later(() => void this.#settle(target), ms);
    }
    if (at === target) this.#on.appeared(target);
  }

  #later(fn: () => void, ms: number): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, ms).unref();
    this.#timers.add(t);
  }

  #acquire(dir: string, target: string): void {
    if (dir === target) return this.#watchLive(target);
    let users = this.#users.get(dir);
    if (!users) {
      users = new Set();
      this.#users.set(dir, users);
      this.#pending.add(dir);
    }
    users.add(target);
  }

  #release(dir: string, target: string): void {
    if (dir === target) {
      this.#live.get(target)?.close();
      this.#live.delete(target);
      this.#unwatched.delete(target);
      this.#erred.delete(target);
      return;
    }
    const users = this.#users.get(dir);
    users?.delete(target);
    if (users?.size === 0) {
      this.#users.delete(dir);
      this.#pending.unwatch(dir);
    }
  }

  /** Targets whose changes go unseen (no inotify watch could be set up); the resync still covers them. */
  get unwatched(): number {
    return this.#unwatched.size;
  }

  #watchLive(target: string): void {
    try {
      const w = this.#watchDir(target, { persistent: false }, (_ev, name) => {
        if (!name || this.#ignoreName(name)) return;
        // The directory itself going away is reported under its own name: check.
        if (name === path.basename(target)) void this.#checkGone(target);
        this.#on.changed(target, name);
      });
      w.on('error', () => void this.#checkGone(target));
      this.#live.set(target, w);
      this.#unwatched.delete(target);
      this.#erred.delete(target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC') {
        // Out of inotify watches (shared with the kubelet and the runtime): said once per
        // target, retried every PENDING_RECHECK_MS; meanwhile only the resync heals it.
        if (!this.#unwatched.has(target)) this.#onError(err);
        this.#unwatched.add(target);
        this.#later(() => {
          if (this.#targets.get(target) !== target || this.#live.has(target) || this.#closed) return;
          this.#watchLive(target);
          // Watched at last: what changed while it was not is checked now, not at the resync.
          if (this.#live.has(target)) this.#on.appeared(target);
        }, PENDING_RECHECK_MS);
        return;
      }
      // Gone meanwhile, or another failure: look again (checkGone sets the watch up again if
      // it is there), no faster than the pending recheck for a failure that persists.
      if (code !== 'ENOENT' && !this.#erred.has(target)) {
        this.#erred.add(target); // said once per target, however often the retry fails
        this.#onError(err);
      }
      this.#later(() => void this.#checkGone(target), code === 'ENOENT' ? 0 : PENDING_RECHECK_MS);
    }
  }

  /** A live target that vanished (torn down by the kubelet) goes back to waiting for it. */
  async #checkGone(target: string): Promise<void> {
    if (this.#targets.get(target) !== target) return;
    if (this.#checking.has(target)) {
      this.#checking.set(target, true); // the one in flight may have looked before this event
      return;
    }
    this.#checking.set(target, false);
    let exists: boolean;
    try {
      exists = await fs.lstat(target).then((st) => st.isDirectory(), () => false);
    } finally {
      const again = this.#checking.get(target);
      this.#checking.delete(target);
      if (again) void this.#checkGone(target);
    }
    if (this.#targets.get(target) !== target) return;
    if (exists) {
      // There, but without a watch (gone at fs.watch and back by now, or a watch that
      // failed otherwise): set one up and catch up on what changed meanwhile.
      if (!this.#live.has(target) && !this.#unwatched.has(target)) {
        this.#watchLive(target);
        if (this.#live.has(target)) this.#on.appeared(target);
      }
      return;
    }
    this.#release(target, target);
    this.#targets.set(target, '');
    void this.#settle(target);
  }

  #ancestorEvent(ev: string, p: string): void {
    if (ev !== 'addDir' && ev !== 'unlinkDir') return;
    for (const target of this.#users.get(path.dirname(p)) ?? []) {
      if (isWithin(p, target)) void this.#settle(target);
    }
  }
}

function isWithin(p: string, target: string): boolean {
  return target === p || target.startsWith(p + path.sep);
}

async function deepestExisting(target: string, root: string): Promise<string> {
  for (let dir = target; ; dir = path.dirname(dir)) {
    if (dir === root || dir === path.dirname(dir)) return dir;
    try {
      if ((await fs.lstat(dir)).isDirectory()) return dir;
    } catch { /* missing: try the parent */ }
  }
}
