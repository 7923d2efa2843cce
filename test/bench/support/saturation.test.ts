import { describe, expect, it } from 'vitest';
import { achievedRate, errorKind, firstSaturated, floorSaturated, replicaSaturated, replicasFor, reviewsAt, spread, type ReplicaPhase } from '../../../bench/support/saturation.ts';

describe('errorKind', () => {
  it.each([
    [{ body: '{"message":"Internal error occurred: failed calling webhook \\"pods.ownerrefs.dev\\": failed to call webhook: Post \\"https://x/mutate\\": context deadline exceeded"}' }, 'timeout'],
    [{ body: { message: 'Timeout: request did not complete within requested timeout' } }, 'timeout'],
    [new Error('connect ECONNREFUSED 127.0.0.1:1'), 'error'],
    [{ body: '{"message":"admission webhook denied the request"}' }, 'error'],
  ])('%j is a %s', (err, kind) => expect(errorKind(err)).toBe(kind));
});

describe('achievedRate', () => {
  it.each([
    [[], 0, 0],
    [[1000, 2000], 0, 1],
    [[100, 200, 300, 400], 0, 10],
    [[500], 500, 0],
  ])('answers at %j from %d: %d a second', (done, start, rate) => expect(achievedRate(done, start)).toBeCloseTo(rate));
});

describe('floorSaturated', () => {
  it.each([
    [{ target: 400, achieved: 395, p99: 80 }, false],
    [{ target: 400, achieved: 350, p99: 80 }, true],
    [{ target: 400, achieved: 399, p99: 1500 }, true],
    [{ target: 50, achieved: 45, p99: 1000 }, false],
  ])('%j: %s', (f, yes) => expect(floorSaturated(f)).toBe(yes));
});

describe('replicaSaturated and firstSaturated', () => {
  const ok: ReplicaPhase = { rate: 50, busiestCores: 0.1, timeouts: 0, errors: 0, reviewsPerCreate: 1, achieved: 50, floorKeptUp: true };
  it.each([
    [ok, undefined],
    [{ ...ok, busiestCores: 0.85 }, /0\.85 of a core/],
    [{ ...ok, timeouts: 3 }, /3 creates timed out/],
    [{ ...ok, reviewsPerCreate: 0.5 }, /fell behind/],
    [{ ...ok, achieved: 40 }, /achieved 40\/s of 50\/s/],
    [{ ...ok, achieved: 40, floorKeptUp: false }, undefined],
    [{ ...ok, timeouts: 1500, reviewsPerCreate: 0.5, floorKeptUp: false }, undefined],
    [{ ...ok, busiestCores: 0.9, timeouts: 1500, floorKeptUp: false }, /0\.90 of a core/],
  ])('%j', (p, why) => {
    const got = replicaSaturated(p);
    if (why === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(why);
  });
  it('is the lowest rate that saturates, in any order given', () => {
    expect(firstSaturated([{ ...ok, rate: 400, achieved: 400, busiestCores: 0.9 }, { ...ok, rate: 100, achieved: 100 }, { ...ok, rate: 200, achieved: 200, timeouts: 1 }])).toEqual({ rate: 200, why: '1 creates timed out calling the webhook' });
    expect(firstSaturated([ok])).toBeUndefined();
  });
});

describe('reviewsAt and replicasFor', () => {
  it.each([
    // rate, CPU s per 1,000 reviews, budget in cores, minimum: replicas
    [400, 1.0, 0.5, 1, 1], // 0.4 core
    [400, 2.0, 0.5, 1, 2], // 0.8 core
    [500, 1.0, 0.5, 1, 1], // exactly 0.5: one is enough
    [2000, 1.5, 0.5, 2, 6], // 3 cores
    [50, 1.0, 0.5, 2, 2], // the minimum
    [100, 1.0, 0.02, 1, 5], // against a 20m request
  ])('%d/s at %d s/1k, %d core each, at least %d: %d', (rate, cpu, budget, min, n) => expect(replicasFor(rate, cpu, budget, min)).toBe(n));
  it.each([[2.0, 1, 500], [2.0, 0.5, 250], [0, 1, Infinity]])('%d s/1k reviews: %d core at %d reviews/s', (cpu, cores, r) => expect(reviewsAt(cpu, cores)).toBe(r));
});

describe('spread', () => {
  it.each([
    [[3, 1, 2], { min: 1, median: 2, max: 3 }],
    [[4, 1, 3, 2], { min: 1, median: 2, max: 4 }],
    [[5, NaN], { min: 5, median: 5, max: 5 }],
    [[], { min: NaN, median: NaN, max: NaN }],
  ])('%j', (xs, s) => expect(spread(xs)).toEqual(s));
});
