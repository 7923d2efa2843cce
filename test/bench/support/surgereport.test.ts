import { describe, expect, it } from 'vitest';
import { judge, type Arm, type ArmRow, type FloorRow, type RateResult } from '../../../bench/support/surgereport.ts';

// Rows carry only what judge reads; the rest of a measured row does not enter its verdict.
const floor = (rate: number, achieved: number, p99: number) => ({ rate, achieved, lat: { p99 } }) as unknown as FloorRow;
const arm = (name: string, cpuPer1kReviewsS: number, over: Partial<ArmRow> = {}) =>
  ({ arm: name, cpuPer1kReviewsS, busiestReplicaCores: 0.2, timeouts: 0, errors: 0, reviewsPerCreate: 1, achieved: 0, ...over }) as ArmRow;
const rate = (r: number, floorKeptUp: boolean, cpu: number, over: Partial<ArmRow> = {}): RateResult => ({
  rate: r, floor: floorKeptUp ? floor(r, r, 50) : floor(r, r / 2, 5_000), floorSaturated: !floorKeptUp,
  arms: [arm('svc-1', cpu, { achieved: floorKeptUp ? r : r / 2, ...over }), arm('svc-3', cpu)],
});
const ARMS = [{ name: 'svc-1' }, { name: 'svc-3' }] as Arm[];

describe('judge', () => {
  it('does not blame one replica for timeouts at a rate where the floor itself fell behind', () => {
    const v = judge([rate(50, true, 1.5), rate(100, true, 1.6), rate(200, false, 4.9, { timeouts: 1500, reviewsPerCreate: 0.6 })], ARMS);
    expect(v.floorSaturatedAt).toBe(200);
    expect(v.oneReplica.observed).toBeNull();
  });

  it('still names a replica that used most of a core where the floor fell behind', () => {
    const v = judge([rate(100, true, 1.6), rate(200, false, 4.9, { busiestReplicaCores: 0.95 })], ARMS);
    expect(v.oneReplica.observed).toEqual({ rate: 200, why: expect.stringMatching(/0\.95 of a core/) });
  });

  it('sizes replicas from the CPU per review measured where the floor kept up', () => {
    const v = judge([rate(50, true, 1.5), rate(100, true, 2), rate(200, false, 4.9)], ARMS);
    expect(v.rule.cpuPer1kReviewsS).toBe(2);
    expect(v.oneReplica.cpuPer1kReviewsS).toEqual({ median: 1.5, max: 2 });
    expect(v.rule.replicas.find((x) => x.rate === 400)?.replicas).toBe(2);
  });

  it('uses every rate when the floor fell behind at all of them', () => {
    const v = judge([rate(200, false, 3), rate(400, false, 5)], ARMS);
    expect(v.rule.cpuPer1kReviewsS).toBe(5);
  });
});
