import { describe, expect, it } from 'vitest';
import { DiskClaims } from '../../../agent/files/diskclaims.ts';

describe('DiskClaims', () => {
  it('lets an ordinary pod use its own UID and a lone mirror pod use its mirror value', () => {
    const c = new DiskClaims();
    c.see('pod-a', undefined);
    c.see('mirror-1', 'f00dfeed');
    expect(c.refusal('pod-a', 'pod-a')).toBeUndefined();
    expect(c.refusal('mirror-1', 'f00dfeed')).toBeUndefined();
  });

  it('refuses a mirror value naming another pod on the node, whichever arrives first', () => {
    const late = new DiskClaims();
    expect(late.see('attacker', 'victim')).toEqual([]);
    expect(late.refusal('attacker', 'victim')).toBeUndefined(); // nothing named victim yet
    expect(late.see('victim', undefined)).toEqual(['attacker']); // revisit the attacker
    expect(late.refusal('attacker', 'victim')).toMatch(/UID of another pod/);

    const early = new DiskClaims();
    early.see('victim', undefined);
    early.see('attacker', 'victim');
    expect(early.refusal('attacker', 'victim')).toMatch(/UID of another pod/);
  });

  it('refuses every claimant of a value claimed twice, and lifts it when one goes', () => {
    const c = new DiskClaims();
    c.see('real-mirror', 'hash');
    expect(c.see('squatter', 'hash')).toEqual(['real-mirror']);
    expect(c.refusal('real-mirror', 'hash')).toMatch(/also claimed by 1 other/);
    expect(c.refusal('squatter', 'hash')).toMatch(/also claimed by 1 other/);
    expect(c.forget('squatter')).toEqual(['real-mirror']);
    expect(c.refusal('real-mirror', 'hash')).toBeUndefined();
  });

  it('revisits claimants when a pod changes or drops its claim', () => {
    const c = new DiskClaims();
    c.see('a', 'x');
    c.see('b', 'x');
    expect(c.see('b', undefined)).toEqual(['a']);
    expect(c.refusal('a', 'x')).toBeUndefined();
    expect(c.pods().sort()).toEqual(['a', 'b']);
  });
});
