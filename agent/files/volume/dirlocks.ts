// Runs operations on one directory one at a time. The work queue already runs one sync
// per pod at a time; CSI publish and unpublish arrive from outside it, and an unpublish
// must not remove files while a sync of the same directory is half way through.

export class DirLocks {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `fn` after every earlier operation on `dir` has settled; its result or error is `fn`'s. */
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
