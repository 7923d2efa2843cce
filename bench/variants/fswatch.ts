// What-if variant for the benchmark (not the product): the subset of chokidar's API
// that agent/dirwatch.ts uses, on plain fs.watch (one inotify watch per directory,
// depth 0). Loaded in place of `chokidar` by ./hook.ts, so the agent runs unchanged
// otherwise. It answers "how much of the agent's CPU and memory per pod is chokidar?"
//
// Events, as dirwatch.ts reads them: an entry of a watched directory appearing is
// 'add' or 'addDir', changing is 'change', disappearing is 'unlinkDir' (its type is
// unknowable once gone; dirwatch.ts treats both the same for entries of a target, and
// needs 'unlinkDir' for ancestors). A watched directory that disappears reports itself
// as 'unlinkDir', as chokidar does.

import { EventEmitter } from 'node:events';
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { lstat } from 'node:fs/promises';
import path from 'node:path';

class DirWatcher extends EventEmitter {
  readonly #watches = new Map<string, FSWatcher>();
  readonly #persistent: boolean;

  constructor(opts: { persistent?: boolean }) {
    super();
    this.#persistent = opts.persistent ?? true;
  }

  add(dir: string): this {
    const d = path.resolve(dir);
    if (this.#watches.has(d)) return this;
    try {
      const w = fsWatch(d, { persistent: this.#persistent }, (ev, name) => void this.#event(d, ev, name));
      w.on('error', (err) => this.#gone(d, err));
      this.#watches.set(d, w);
    } catch (err) {
      this.emit('error', err);
    }
    return this;
  }

  unwatch(dir: string): this {
    const d = path.resolve(dir);
    this.#watches.get(d)?.close();
    this.#watches.delete(d);
    return this;
  }

  async close(): Promise<void> {
    for (const w of this.#watches.values()) w.close();
    this.#watches.clear();
  }

  #gone(d: string, err: unknown): void {
    this.unwatch(d);
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.emit('error', err);
  }

  async #event(d: string, ev: string, name: string | null): Promise<void> {
    if (!name) return;
    const p = path.join(d, name);
    let kind: string;
    try {
      const st = await lstat(p);
      kind = ev === 'change' ? 'change' : st.isDirectory() ? 'addDir' : 'add';
    } catch {
      // The directory itself may be what went away (IN_DELETE_SELF names it).
      try {
        await lstat(d);
      } catch {
        this.#gone(d, Object.assign(new Error('gone'), { code: 'ENOENT' }));
        this.emit('all', 'unlinkDir', d);
        return;
      }
      kind = 'unlinkDir';
    }
    this.emit('all', kind, p);
  }
}

export function watch(paths: string | string[], opts: { persistent?: boolean } = {}): DirWatcher {
  const w = new DirWatcher(opts);
  for (const p of [paths].flat()) w.add(p);
  return w;
}
