// Watches volume directories with chokidar: tells the agent when a directory the
// kubelet creates appears (so files land within a second of it), and when a file
// in it is changed or removed (so the agent restores it: self-heal).
//
// chokidar watches only existing directories at depth 0 here (never recursively:
// the pods tree is large and pod-writable). A target that does not exist yet is
// watched through its deepest existing ancestor, and the watch moves down one level
// each time the next component appears. Symlinks are never followed. inotify holds
// no file descriptor in the watched directory.
//
// chokidar sets a watch up asynchronously, so a directory created between our
// lstat and the watch being live would be missed: a target still pending is
// re-checked shortly after each move, and then every PENDING_RECHECK_MS.

import path from 'node:path';
import fs from 'node:fs/promises';
import { watch, type FSWatcher } from 'chokidar';

export interface DirWatchEvents {
  /** The target directory now exists (also when it existed on watch()). */
  appeared(dir: string): void;
  /** An entry named `name` directly inside the target changed, appeared or went away. */
  changed(dir: string, name: string): void;
}

/** The seam the agent uses; the default is chokidar-backed. */
export interface DirWatcher {
  watch(dir: string): void;
  unwatch(dir: string): void;
  close(): Promise<void>;
}

const SETTLE_RECHECK_MS = [100, 1_000];
const PENDING_RECHECK_MS = 5_000;

export class ChokidarDirWatcher implements DirWatcher {
  readonly #w: FSWatcher;
  readonly #root: string;
  readonly #on: DirWatchEvents;
  /** target -> the directory currently watched on its behalf (itself once it exists). */
  readonly #targets = new Map<string, string>();
  /** watched directory -> the targets it is watched for (indexes events: no scan of all targets). */
  readonly #users = new Map<string, Set<string>>();
  #closed = false;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #pendingCheck: NodeJS.Timeout;

  /**
   * `root`: targets are below it and it always exists (the kubelet root).
   * `ignoreName`: entry names not worth an event (the writer's temporaries): chokidar
   * drops them before its own stat, which is most of its cost per event.
   */
  constructor(root: string, on: DirWatchEvents, onError: (err: unknown) => void, ignoreName: (name: string) => boolean = () => false) {
    this.#root = path.resolve(root);
    this.#on = on;
    this.#w = watch([], {
      depth: 0, followSymlinks: false, ignoreInitial: true, atomic: false, persistent: false,
      ignored: (p: string) => ignoreName(path.basename(p)),
    });
    this.#w.on('all', (ev, p) => this.#event(ev, path.resolve(p)));
    this.#w.on('error', onError);
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
    await this.#w.close();
  }

  /** Move the target's watch to its deepest existing ancestor (or itself). */
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
    let users = this.#users.get(dir);
    if (!users) {
      users = new Set();
      this.#users.set(dir, users);
      this.#w.add(dir);
    }
    users.add(target);
  }

  #release(dir: string, target: string): void {
    const users = this.#users.get(dir);
    users?.delete(target);
    if (users?.size === 0) {
      this.#users.delete(dir);
      this.#w.unwatch(dir);
    }
  }

  #event(ev: string, p: string): void {
    // The target itself was removed (volume torn down): wait for it again.
    if (ev === 'unlinkDir' && this.#targets.get(p) === p) void this.#settle(p);
    const parent = path.dirname(p);
    for (const target of this.#users.get(parent) ?? []) {
      if (target === parent) this.#on.changed(target, path.basename(p));
      else if ((ev === 'addDir' || ev === 'unlinkDir') && isWithin(p, target)) void this.#settle(target);
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
