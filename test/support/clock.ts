// A Clock driven by hand: advance() runs the timers that fall due, in time order.

import type { Clock } from '../../agent/common/clock.ts';

export class FakeClock implements Clock {
  #now = 0;
  #timers: { at: number; fn: () => void; id: number }[] = [];
  #ids = 0;

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): () => void {
    const id = ++this.#ids;
    this.#timers.push({ at: this.#now + ms, fn, id });
    return () => { this.#timers = this.#timers.filter((t) => t.id !== id); };
  }

  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = due.at;
      due.fn();
    }
    this.#now = end;
  }
}
