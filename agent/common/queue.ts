// A keyed work queue in the manner of client-go's workqueue: a key is queued at most
// once, processed by at most one worker at a time, and re-run if it was added
// while being processed. Retries use a per-key exponential backoff.

import { Backoff, realClock, type Clock } from './clock.ts';
import { SYNC_RETRY } from './defaults.ts';

export interface QueueOptions {
  concurrency: number;
  process(key: string): Promise<void>;
  clock?: Clock;
  retry?: { initialMs: number; maxMs: number };
}

export class WorkQueue {
  readonly #o: Required<QueueOptions>;
  readonly #pending: string[] = [];
  readonly #queued = new Set<string>();
  readonly #active = new Set<string>();
  /** Keys added while active: run again when the current run ends. */
  readonly #dirty = new Set<string>();
  /** Keys asked for with addIfIdle while active: run again only if that run set no retry. */
  readonly #dirtySoft = new Set<string>();
  /** Delayed adds, and whether retry() (a failure's backoff) set them rather than addAfter. */
  readonly #delayed = new Map<string, { cancel: () => void; retry: boolean }>();
  readonly #backoffs = new Map<string, Backoff>();
  #running = 0;
  #stopped = false;
  #idle: (() => void)[] = [];

  constructor(opts: QueueOptions) {
    this.#o = { clock: realClock, retry: SYNC_RETRY, ...opts };
  }

  get length(): number {
    return this.#pending.length;
  }

  add(key: string): void {
    if (this.#stopped) return;
    this.#cancelDelayed(key);
    if (this.#active.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#pending.push(key);
    this.#pump();
  }

  /**
   * Add after the key's next backoff delay (grows per consecutive retry). Returns the delay.
   * The backoff wins over a shorter delay already pending (a rate-limited repair).
   */
  retry(key: string): number {
    let b = this.#backoffs.get(key);
    if (!b) {
      b = new Backoff(this.#o.retry);
      this.#backoffs.set(key, b);
    }
    const ms = b.next();
    this.#cancelDelayed(key);
    this.#delay(key, ms, true);
    return ms;
  }

  /**
   * Add unless a delayed add is pending (it covers this). While the key runs, it runs again
   * afterwards only if that run set no retry: news that changes nothing must not cut a
   * failure's backoff short (add() is for news that should).
   */
  addIfIdle(key: string): void {
    if (this.#stopped || this.#delayed.has(key)) return;
    if (this.#active.has(key)) this.#dirtySoft.add(key);
    else this.add(key);
  }

  /** Add after `ms` (a rate-limited repair), unless a delayed add is pending already. */
  addAfter(key: string, ms: number): void {
    if (this.#delayed.has(key)) return;
    this.#delay(key, ms, false);
  }

  /** True while a delayed add of the key is pending (a retry's backoff, or a rate-limited repair). */
  retrying(key: string): boolean {
    return this.#delayed.has(key);
  }

  /**
   * The key succeeded or went away: reset its backoff and drop a pending retry. A delayed
   * add from addAfter stays: it is for news since (a repair), which success does not cover.
   */
  forget(key: string): void {
    this.#backoffs.delete(key);
    if (this.#delayed.get(key)?.retry) this.#cancelDelayed(key);
  }

  #delay(key: string, ms: number, retry: boolean): void {
    if (this.#stopped) return;
    const cancel = this.#o.clock.setTimer(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    this.#delayed.set(key, { cancel, retry });
  }

  /** Stop taking work, cancel retries, and wait for in-flight work to finish. */
  async drain(): Promise<void> {
    this.#stopped = true;
    for (const { cancel } of this.#delayed.values()) cancel();
    this.#delayed.clear();
    this.#pending.length = 0;
    this.#queued.clear();
    await this.idle();
  }

  /** Resolves when nothing is queued or running (delayed retries do not count). */
  idle(): Promise<void> {
    if (this.#running === 0 && this.#pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #cancelDelayed(key: string): void {
    this.#delayed.get(key)?.cancel();
    this.#delayed.delete(key);
  }

  #pump(): void {
    while (this.#running < this.#o.concurrency && this.#pending.length > 0) {
      const key = this.#pending.shift()!;
      this.#queued.delete(key);
      this.#active.add(key);
      this.#running++;
      void this.#o.process(key)
        .catch(() => { /* process() handles and reports its own errors */ })
        .finally(() => {
          this.#running--;
          this.#active.delete(key);
          // Asked for again while it ran: news runs now; a soft ask only if no retry was set.
          const soft = this.#dirtySoft.delete(key);
          if (this.#dirty.delete(key) || (soft && !this.#delayed.has(key))) this.add(key);
          // Next key on a later turn of the event loop: writes to tmpfs run inline (fsops.ts),
          // and a burst must not starve the health server or the watch streams.
          setImmediate(() => this.#pump());
          if (this.#running === 0 && this.#pending.length === 0) for (const r of this.#idle.splice(0)) r();
        });
    }
  }
}
