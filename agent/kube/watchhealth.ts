// Whether a reflector's watch is down, and since when (/readyz fails after READY_DOWN_MS).
//
//   down   from a failure (if the watch was connected: from then; else from the attempt's
//          start), from a 410 until the first state is read again, and from the connection
//          of a watch that ended within LASTED_MS of it. The earliest cause counts: a
//          retry that fails again does not restart the clock.
//   up     when a watch is connected; a streamed first state only at its closing bookmark
//          (the reflector calls up()). After watches that ended at once (a proxy cutting
//          streams answers 200 and closes) a connection alone is not enough: the watch must
//          deliver an event or stay connected LASTED_MS.

import type { Clock } from '../common/clock.ts';

/** A watch connected for less than this before it ended did not really watch. */
export const LASTED_MS = 1_000;

export class WatchHealth {
  readonly #clock: Clock;
  /** Since when the watch has been down; undefined while it is up. */
  #downSince: number | undefined;
  /** The last watch ended at once: the next connection alone does not count as up. */
  #flapping = false;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Milliseconds the watch has been down, 0 when up. */
  downForMs(): number {
    return this.#downSince === undefined ? 0 : this.#clock.now() - this.#downSince;
  }

  /** A failure, or a 410: down from `since` unless already down. */
  down(since: number): void {
    this.#downSince ??= since;
  }

  /** A watch ended within LASTED_MS of `connectedAt`: down from its connection. */
  endedAtOnce(connectedAt: number): void {
    this.#flapping = true;
    this.down(connectedAt);
  }

  /** A watch (not a streamed first state) was connected. Returns what cancels its LASTED_MS timer. */
  connected(): () => void {
    if (!this.#flapping) {
      this.#downSince = undefined;
      return () => {};
    }
    return this.#clock.setTimer(() => this.up(), LASTED_MS);
  }

  /** An event arrived on a connected watch. */
  delivered(): void {
    if (this.#flapping) this.up();
  }

  /** The watch works: a first state was read, or it lasted. */
  up(): void {
    this.#flapping = false;
    this.#downSince = undefined;
  }
}
