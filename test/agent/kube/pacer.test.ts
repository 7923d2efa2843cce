import { describe, expect, it } from 'vitest';
import { RecoveryPacer } from '../../../agent/kube/pacer.ts';
import { FakeClock } from '../../support/clock.ts';

/** Takes slots at the given times (ms, ascending); returns when each was granted, to the millisecond. */
async function grants(p: RecoveryPacer, clock: FakeClock, calls: number[], until: number): Promise<number[]> {
  const at: number[] = [];
  const flush = async () => { for (let i = 0; i < 5; i++) await Promise.resolve(); };
  let next = 0;
  for (let t = clock.now(); t <= until; t++) {
    clock.advance(t - clock.now());
    await flush();
    for (; next < calls.length && calls[next]! <= t; next++) {
      const i = next;
      void p.slot().then(() => { at[i] = clock.now(); });
    }
    await flush();
  }
  expect(at.filter((x) => x !== undefined)).toHaveLength(calls.length);
  return at;
}

describe('RecoveryPacer', () => {
  it('grants the first slot after a quiet period at a random point of the first interval', async () => {
    const clock = new FakeClock();
    clock.advance(10_000);
    const p = new RecoveryPacer({ spacingMs: 1_000, clock, random: () => 0.4 });
    expect(await grants(p, clock, [10_000], 12_000)).toEqual([10_400]);
  });

  it('grants queued callers one slot per spacing, in call order', async () => {
    const clock = new FakeClock();
    const p = new RecoveryPacer({ spacingMs: 1_000, clock, random: () => 0 });
    expect(await grants(p, clock, [0, 0, 0, 10], 5_000)).toEqual([0, 1_000, 2_000, 3_000]);
  });

  it('starts a new random phase once idle, never closer than one spacing to the last slot', async () => {
    const clock = new FakeClock();
    const draws = [1, 0];
    const p = new RecoveryPacer({ spacingMs: 1_000, clock, random: () => draws.shift()! });
    // First slot at 1,000 (random 1); the next call at 2,100 is idle again: random 0 grants it at once.
    expect(await grants(p, clock, [0, 2_100], 4_000)).toEqual([1_000, 2_100]);
  });

  it.each([0, 0.3, 0.99])('keeps any two slots at least one spacing apart, whatever the call times (random %s)', async (r) => {
    const clock = new FakeClock();
    const p = new RecoveryPacer({ spacingMs: 500, clock, random: () => r });
    const calls = [0, 1, 2, 400, 900, 1_700, 1_701, 4_000, 4_499, 9_000];
    const at = (await grants(p, clock, calls, 20_000)).sort((a, b) => a - b);
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(500);
    for (const [i, t] of calls.entries()) expect(at[i]!).toBeGreaterThanOrEqual(t);
  });

  it('resolves at once when the signal aborts', async () => {
    const p = new RecoveryPacer({ spacingMs: 3_600_000, random: () => 1 });
    const ac = new AbortController();
    const slot = p.slot(ac.signal);
    ac.abort();
    await slot; // would take an hour otherwise
    expect(ac.signal.aborted).toBe(true);
  });
});
