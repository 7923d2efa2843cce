// Per-key token buckets: one pod cannot flood Events or logs, however often it fails.

import { realClock, type Clock } from './clock.ts';

export interface RateLimitOptions {
  /** Tokens a key starts with (a burst). */
  burst: number;
  /** One token is added per this many ms. */
  refillMs: number;
  /** Keys tracked at most; the oldest is forgotten first (bounded memory). */
  maxKeys?: number;
  clock?: Clock;
}

interface Bucket {
  tokens: number;
  at: number;
  /** Calls refused since the last allowed one, reported with the next. */
  suppressed: number;
}

export class KeyedRateLimiter {
  readonly #o: Required<RateLimitOptions>;
  readonly #buckets = new Map<string, Bucket>();

  constructor(opts: RateLimitOptions) {
    this.#o = { maxKeys: 10_000, clock: realClock, ...opts };
  }

  /** Take a token for key. Returns how many calls were suppressed before this one, or null if refused. */
  take(key: string): number | null {
    const now = this.#o.clock.now();
    let b = this.#buckets.get(key);
    if (!b) {
      if (this.#buckets.size >= this.#o.maxKeys) {
        const oldest = this.#buckets.keys().next().value;
        if (oldest !== undefined) this.#buckets.delete(oldest);
      }
      b = { tokens: this.#o.burst, at: now, suppressed: 0 };
      this.#buckets.set(key, b);
    }
    b.tokens = Math.min(this.#o.burst, b.tokens + (now - b.at) / this.#o.refillMs);
    b.at = now;
    if (b.tokens < 1) {
      b.suppressed++;
      return null;
    }
    b.tokens--;
    const suppressed = b.suppressed;
    b.suppressed = 0;
    return suppressed;
  }

  forget(key: string): void {
    this.#buckets.delete(key);
  }
}

/** One token bucket: `burst` at once, then one per `refillMs`. */
export class TokenBucket {
  readonly #burst: number;
  readonly #refillMs: number;
  readonly #clock: Clock;
  #tokens: number;
  #at: number;

  constructor(opts: { burst: number; refillMs: number; clock?: Clock }) {
    this.#burst = opts.burst;
    this.#refillMs = opts.refillMs;
    this.#clock = opts.clock ?? realClock;
    this.#tokens = opts.burst;
    this.#at = this.#clock.now();
  }

  /** Takes a token: 0 when one was taken, else how many ms until one is there (nothing taken). */
  take(): number {
    this.#refill();
    if (this.#tokens >= 1) {
      this.#tokens--;
      return 0;
    }
    return Math.ceil((1 - this.#tokens) * this.#refillMs);
  }

  /**
   * No token for `ms` from now, then refilling from empty (no burst): what a server's "wait"
   * (429 with Retry-After) asks of every request behind this bucket, not only the refused one.
   * The wait is a debt of tokens, so a longer hold is never shortened by a shorter one.
   */
  hold(ms: number): void {
    this.#refill();
    this.#tokens = Math.min(this.#tokens, -ms / this.#refillMs);
  }

  #refill(): void {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#at) / this.#refillMs);
    this.#at = now;
  }
}
