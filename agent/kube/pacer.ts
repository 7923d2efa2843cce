// RecoveryPacer: one agent's requests that follow a failure go out one at a time.
//
// When the API server restarts, every agent's watches break in the same instant and every
// agent must make the same few requests again (a watch that the restarted server answers
// with 410, a relist, a new watch, for pods and for the Node). Backoff with jitter spreads
// each watch's retries, but not the agent's sum of them, and it says nothing of the 410
// path. The pacer bounds the sum: an agent's recovery requests are at least `spacingMs`
// apart, and the first after a quiet period lands at a random point of the first
// interval, so agents that failed together spread over it. A fleet of K agents then makes
// about K / spacing recovery requests per second, and never more than K in any one
// second, however the outage went (docs/PERFORMANCE.md, "Reconnect storm").
//
// Healthy traffic does not pass through it: the first list and watch, and the re-watch
// after a server-side timeout (those timeouts are already randomised per watch).

import { realClock, sleep, type Clock } from '../common/clock.ts';

export interface PacerOptions {
  spacingMs: number;
  clock?: Clock;
  random?: () => number;
}

export class RecoveryPacer {
  readonly #spacingMs: number;
  readonly #clock: Clock;
  readonly #random: () => number;
  /** The earliest time the next slot may start; in the past while the pacer is idle. */
  #next = -Infinity;

  constructor(opts: PacerOptions) {
    this.#spacingMs = opts.spacingMs;
    this.#clock = opts.clock ?? realClock;
    this.#random = opts.random ?? Math.random;
  }

  /**
   * Resolves when the caller may make its request: slots are handed out in call order,
   * `spacingMs` apart. Resolves early (without throwing) when the signal aborts; the slot
   * stays spent, which only delays later callers.
   */
  async slot(signal?: AbortSignal): Promise<void> {
    const now = this.#clock.now();
    // Idle: a random phase within the first interval. Busy: right after the last slot.
    const at = this.#next <= now ? now + this.#random() * this.#spacingMs : this.#next;
    this.#next = at + this.#spacingMs;
    if (at > now) await sleep(this.#clock, at - now, signal);
  }
}
