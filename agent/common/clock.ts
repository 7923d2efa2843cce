// Time seam: the reflector, queue and rate limiters take a Clock so unit tests can
// drive time by hand. The default is the real clock.

export interface Clock {
  now(): number;
  /** Calls fn after ms; returns a cancel function. */
  setTimer(fn: () => void, ms: number): () => void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

/** Resolves after ms, or early (without throwing) when the signal aborts. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      cancel();
      resolve();
    };
    const cancel = clock.setTimer(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Exponential backoff with jitter; reset() after a healthy period. */
export class Backoff {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(opts: { initialMs: number; maxMs: number; random?: () => number }) {
    this.#initialMs = opts.initialMs;
    this.#maxMs = opts.maxMs;
    this.#random = opts.random ?? Math.random;
  }

  /**
   * The next delay: base doubles per failure up to max; "full jitter" draws it from
   * [0, base], so clients that failed at the same instant (every agent of a fleet when
   * the API server restarts) spread their retries over the whole window, not its top half.
   */
  next(): number {
    const base = Math.min(this.#maxMs, this.#initialMs * 2 ** this.#attempt);
    if (base < this.#maxMs) this.#attempt++;
    return Math.round(this.#random() * base);
  }

  reset(): void {
    this.#attempt = 0;
  }
}
