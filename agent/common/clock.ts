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
  readonly #full: boolean;
  #attempt = 0;

  /**
   * `fullJitter`: draw from [0, step] (for clients of a shared server that fail together,
   * like a fleet's watches); otherwise from [step/2, step], so each delay is sure to grow
   * (a single pod's retries).
   */
  constructor(opts: { initialMs: number; maxMs: number; random?: () => number; fullJitter?: boolean }) {
    this.#initialMs = opts.initialMs;
    this.#maxMs = opts.maxMs;
    this.#random = opts.random ?? Math.random;
    this.#full = opts.fullJitter ?? false;
  }

  /** The next delay: the step doubles per failure up to max, with jitter as constructed. */
  next(): number {
    const base = Math.min(this.#maxMs, this.#initialMs * 2 ** this.#attempt);
    if (base < this.#maxMs) this.#attempt++;
    return Math.round(this.#full ? this.#random() * base : base / 2 + (this.#random() * base) / 2);
  }

  reset(): void {
    this.#attempt = 0;
  }
}
