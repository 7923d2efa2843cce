// Slices: a first state (the pods of a list or a relist) applied a slice at a time, with a
// turn of the event loop between slices, so that rendering a thousand pods is not one
// long synchronous run (V8 finishes its garbage collections between slices; probes and
// CSI calls are answered meanwhile).
//
//   start(items)     the first slice now, the rest on later turns; replaces a run in progress
//   supersede(key)   a newer version of `key` was applied directly (a watch event, a CSI
//                    GET): its pending one is dropped, never applied over the newer one
//   take(key)        the pending item, removed: for a caller about to apply that key itself
//   done()           resolves once nothing is pending
//
// Items are applied in the order given, each at most once. An item whose apply throws is
// reported and the rest are still applied: one bad item never stops a first state.

export interface SlicesOptions<T> {
  size: number;
  apply(item: T): void;
  /** An apply threw (a defect: apply handles what it expects); the item is dropped. */
  failed(item: T, err: unknown): void;
  /** One turn of the event loop (default: setImmediate). */
  turn?: () => Promise<void>;
}

export class Slices<T> {
  readonly #o: Required<SlicesOptions<T>>;
  #pending: Map<string, T> = new Map();
  #running: Promise<void> | undefined;

  constructor(opts: SlicesOptions<T>) {
    this.#o = { turn: () => new Promise((resolve) => setImmediate(resolve)), ...opts };
  }

  /** Items not applied yet. */
  get pending(): number {
    return this.#pending.size;
  }

  start(items: ReadonlyMap<string, T>): void {
    this.#pending = new Map(items);
    this.#step();
    if (this.#pending.size > 0) this.#running ??= this.#loop();
  }

  supersede(key: string): void {
    this.#pending.delete(key);
  }

  take(key: string): T | undefined {
    const item = this.#pending.get(key);
    this.#pending.delete(key);
    return item;
  }

  async done(): Promise<void> {
    while (this.#running) await this.#running;
  }

  /** Drops everything pending (shutdown). */
  cancel(): void {
    this.#pending.clear();
  }

  async #loop(): Promise<void> {
    try {
      while (this.#pending.size > 0) {
        await this.#o.turn();
        this.#step();
      }
    } finally {
      this.#running = undefined;
    }
  }

  #step(): void {
    let n = 0;
    for (const [key, item] of this.#pending) {
      if (n++ >= this.#o.size) break;
      this.#pending.delete(key);
      try {
        this.#o.apply(item);
      } catch (err) {
        this.#o.failed(item, err);
      }
    }
  }
}
