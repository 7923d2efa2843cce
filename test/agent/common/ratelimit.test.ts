import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../../agent/common/ratelimit.ts';
import { FakeClock } from '../../support/clock.ts';

describe('TokenBucket.hold', () => {
  it.each([
    { what: 'a full bucket gives nothing during the hold, then refills from empty (no burst)', holds: [1_000], at: [999, 1_000, 1_099, 1_100], want: [101, 100, 1, 0] },
    { what: 'a shorter hold does not shorten a longer one', holds: [1_000, 200], at: [999, 1_100], want: [101, 0] },
    { what: 'a longer hold extends a shorter one', holds: [200, 1_000], at: [999, 1_100], want: [101, 0] },
  ])('$what', ({ holds, at, want }) => {
    const clock = new FakeClock();
    const b = new TokenBucket({ burst: 5, refillMs: 100, clock });
    for (const ms of holds) b.hold(ms);
    const got: number[] = [];
    let now = 0;
    for (const t of at) {
      clock.advance(t - now);
      now = t;
      got.push(b.take());
    }
    expect(got).toEqual(want);
  });
});
