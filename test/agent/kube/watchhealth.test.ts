import { describe, expect, it } from 'vitest';
import { LASTED_MS, WatchHealth } from '../../../agent/kube/watchhealth.ts';
import { FakeClock } from '../../support/clock.ts';

type Step = (h: WatchHealth, c: FakeClock) => void;
const at = (ms: number): Step => (_h, c) => c.advance(ms - c.now());
const down = (since: number): Step => (h) => h.down(since);
const endedAtOnce = (connectedAt: number): Step => (h) => h.endedAtOnce(connectedAt);
let cancel = () => {};
const connected: Step = (h) => { cancel = h.connected(); };
const disconnected: Step = () => cancel();
const delivered: Step = (h) => h.delivered();

describe('when a watch counts as down (/readyz)', () => {
  it.each<[string, Step[], number]>([
    ['up from the start', [at(5_000)], 0],
    ['down from a failure, counted from its time', [at(1_000), down(400), at(3_000)], 2_600],
    ['a second failure does not restart the clock', [down(0), at(2_000), down(2_000), at(5_000)], 5_000],
    ['up as soon as a watch is connected', [down(0), at(2_000), connected, at(3_000)], 0],
    ['a watch that ended at once is down from its connection', [at(1_000), endedAtOnce(900), at(1_500)], 600],
    ['after one, a connection alone is not up', [endedAtOnce(0), at(100), connected, at(LASTED_MS - 1)], LASTED_MS - 1],
    ['after one, a connection that lasts LASTED_MS is up', [endedAtOnce(0), at(100), connected, at(100 + LASTED_MS)], 0],
    ['after one, a connection that delivers an event is up', [endedAtOnce(0), at(100), connected, at(200), delivered], 0],
    ['after one, a connection that ends before LASTED_MS is still down', [endedAtOnce(0), at(100), connected, at(500), disconnected, at(5_000)], 5_000],
    ['an event on a healthy watch changes nothing', [at(100), delivered, at(500)], 0],
  ])('%s', (_what, steps, downFor) => {
    const c = new FakeClock();
    const h = new WatchHealth(c);
    cancel = () => {};
    for (const s of steps) s(h, c);
    expect(h.downForMs()).toBe(downFor);
  });
});
