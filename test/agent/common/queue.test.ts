import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../../agent/common/queue.ts';
import { KeyedRateLimiter } from '../../../agent/common/ratelimit.ts';
import { FakeClock } from '../../support/clock.ts';

describe('WorkQueue', () => {
  it('keeps a repair delayed with addAfter when the key\'s run succeeds (forget cancels only a failure\'s retry)', async () => {
    const clock = new FakeClock();
    const runs: string[] = [];
    let release = () => {};
    const q = new WorkQueue({ concurrency: 1, clock, process: async (k) => {
      runs.push(k);
      if (runs.length === 1) await new Promise<void>((r) => { release = r; });
      q.forget(k); // success
    } });
    q.add('a');
    await new Promise((r) => setImmediate(r));
    q.addAfter('a', 1_000); // a rate-limited repair asked for during the run
    release();
    await q.idle();
    clock.advance(1_000);
    await q.idle();
    expect(runs).toEqual(['a', 'a']);
  });

  it('runs a key again after a failing run when add() came during it (news), but not after addIfIdle (no news)', async () => {
    const clock = new FakeClock();
    for (const [ask, want] of [['add', 2], ['addIfIdle', 1]] as const) {
      let runs = 0;
      let release = () => {};
      const q = new WorkQueue({ concurrency: 1, clock, process: async (k) => {
        runs++;
        if (runs === 1) await new Promise<void>((r) => { release = r; });
        q.retry(k); // failure
      } });
      q.add('a');
      await new Promise((r) => setImmediate(r));
      q[ask]('a');
      release();
      await q.idle();
      await new Promise((r) => setTimeout(r, 20));
      expect(runs, ask).toBe(want);
      await q.drain();
    }
  });

  it('lets a failure\'s backoff replace a shorter delay already pending, and addIfIdle wait for both', async () => {
    const clock = new FakeClock();
    const runs: string[] = [];
    const q = new WorkQueue({ concurrency: 1, clock, retry: { initialMs: 10_000, maxMs: 60_000 }, process: async (k) => void runs.push(k) });
    q.addAfter('a', 1_000); // a rate-limited repair
    q.retry('a'); // then a failure: 5-10 s
    q.addIfIdle('a'); // a status update: the retry covers it
    clock.advance(1_000);
    await q.idle();
    expect(runs).toEqual([]);
    clock.advance(10_000);
    await q.idle();
    expect(runs).toEqual(['a']);
  });


  it('coalesces adds of a queued key and never runs one key twice at once', async () => {
    const runs: string[] = [];
    let active = 0;
    let maxActive = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = new WorkQueue({
      concurrency: 1,
      async process(key) {
        active++;
        maxActive = Math.max(maxActive, active);
        runs.push(key);
        if (runs.length === 1) await gate;
        active--;
      },
    });
    q.add('a');
    q.add('a'); // active: marked dirty, runs once more afterwards
    q.add('a');
    q.add('b');
    q.add('b'); // queued: coalesced
    expect(q.length).toBe(1); // just 'b'
    release();
    await q.idle();
    expect(runs).toEqual(['a', 'b', 'a']);
    expect(maxActive).toBe(1);
  });

  it('retries with a growing per-key delay and forgets on success', async () => {
    const q = new WorkQueue({ concurrency: 1, process: async () => {}, retry: { initialMs: 10, maxMs: 1000 } });
    const delays = [q.retry('k'), q.retry('k'), q.retry('k')];
    expect(delays[1]!).toBeGreaterThanOrEqual(10);
    expect(delays[2]!).toBeGreaterThanOrEqual(20);
    q.forget('k');
    expect(q.retry('k')).toBeLessThanOrEqual(10);
    await q.drain();
  });

  it('drain waits for in-flight work and refuses new work', async () => {
    let finished = false;
    const q = new WorkQueue({ concurrency: 1, process: async () => { await new Promise((r) => setTimeout(r, 50)); finished = true; } });
    q.add('x');
    await q.drain();
    expect(finished).toBe(true);
    q.add('y');
    expect(q.length).toBe(0);
  });
});

describe('KeyedRateLimiter', () => {
  it('allows a burst per key, then one per refill period, and counts what it suppressed', () => {
    let now = 0;
    const rl = new KeyedRateLimiter({ burst: 2, refillMs: 1000, clock: { now: () => now, setTimer: () => () => {} } });
    expect([rl.take('p'), rl.take('p'), rl.take('p'), rl.take('p')]).toEqual([0, 0, null, null]);
    expect(rl.take('other')).toBe(0);
    now = 1000;
    expect(rl.take('p')).toBe(2);
    expect(rl.take('p')).toBeNull();
  });

  it('keeps memory bounded by forgetting the oldest keys', () => {
    const rl = new KeyedRateLimiter({ burst: 1, refillMs: 1e9, maxKeys: 3 });
    for (const k of ['a', 'b', 'c', 'd']) rl.take(k);
    expect(rl.take('a')).toBe(0); // forgotten, so it starts with a full bucket again
    expect(rl.take('d')).toBeNull();
  });
});
