import { describe, expect, it } from 'vitest';
import type { OwnerLookup } from '../../../agent/owners/ownermeta.ts';
import { MAX_CHAIN, walkChain } from '../../../agent/owners/chain.ts';
import type { OwnerReference } from '../../../projections/index.ts';
import { owner } from '../../support/fixtures.ts';

const rs = owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-1' });
const dep = owner({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'dep-1' });
const job = owner({ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29', uid: 'job-1' });
const cron = owner({ apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: 'cron-1' });
const ok = (...refs: OwnerReference[]): OwnerLookup => ({ state: 'ok', ownerReferences: refs });

/** A fake cluster: owner UID -> what a lookup answers. */
function lookupIn(world: Record<string, OwnerLookup>) {
  const asked: string[] = [];
  return { asked, lookup: (_ns: string, ref: OwnerReference): OwnerLookup => { asked.push(ref.uid); return world[ref.uid] ?? { state: 'error', reason: 'NotFound', message: 'gone' }; } };
}

describe('walkChain', () => {
  const cases: { name: string; pod: OwnerReference[] | null; world: Record<string, OwnerLookup>; items: string[]; end: string }[] = [
    { name: 'Pod -> ReplicaSet -> Deployment', pod: [rs], world: { 'rs-1': ok(dep), 'dep-1': ok() }, items: ['ReplicaSet', 'Deployment'], end: 'Top' },
    { name: 'Pod -> Job -> CronJob', pod: [job], world: { 'job-1': ok(cron), 'cron-1': ok() }, items: ['Job', 'CronJob'], end: 'Top' },
    { name: 'a bare pod', pod: null, world: {}, items: [], end: 'NoController' },
    { name: 'owners without controller: true', pod: [owner({ controller: false }), owner({ controller: undefined })], world: {}, items: [], end: 'NoController' },
    { name: 'a ReplicaSet orphaned from its Deployment', pod: [rs], world: { 'rs-1': ok(owner({ ...dep, controller: false })) }, items: ['ReplicaSet'], end: 'Top' },
    { name: 'a mirror pod: its Node is the top, read from no API', pod: [owner({ apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'node-1' })], world: {}, items: ['Node'], end: 'Top' },
    { name: 'the first read still in flight', pod: [rs], world: { 'rs-1': { state: 'pending' } }, items: ['ReplicaSet'], end: 'Pending' },
    { name: 'an owner deleted while its pods remain', pod: [rs], world: {}, items: ['ReplicaSet'], end: 'NotFound' },
    { name: 'an owner whose UID does not match', pod: [rs], world: { 'rs-1': { state: 'error', reason: 'UIDMismatch', message: 'other uid' } }, items: ['ReplicaSet'], end: 'UIDMismatch' },
    { name: 'a kind not followed (an Argo Rollout)', pod: [rs], world: { 'rs-1': ok(owner({ apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout', uid: 'ro-1' })), 'ro-1': { state: 'error', reason: 'KindNotFollowed', message: 'not listed' } }, items: ['ReplicaSet', 'Rollout'], end: 'KindNotFollowed' },
    { name: 'a kind the API server does not serve', pod: [rs], world: { 'rs-1': ok(owner({ kind: 'Gone', uid: 'g-1' })), 'g-1': { state: 'error', reason: 'NotServed', message: 'no such resource' } }, items: ['ReplicaSet', 'Gone'], end: 'NotServed' },
    { name: 'a kind the agent may not read', pod: [rs], world: { 'rs-1': { state: 'error', reason: 'Forbidden', message: 'rbac' } }, items: ['ReplicaSet'], end: 'Forbidden' },
    { name: 'a cycle', pod: [rs], world: { 'rs-1': ok(dep), 'dep-1': ok(rs) }, items: ['ReplicaSet', 'Deployment'], end: 'Cycle' },
    { name: 'a self-owner', pod: [rs], world: { 'rs-1': ok(rs) }, items: ['ReplicaSet'], end: 'Cycle' },
  ];

  it.each(cases)('$name', ({ pod, world, items, end }) => {
    const w = walkChain('ns', pod, lookupIn(world).lookup);
    expect({ items: w.chain.items.map((i) => i.kind), end: w.chain.end.reason }).toEqual({ items, end });
    expect(w.chain.end.message).not.toBe('');
  });

  it(`stops after ${MAX_CHAIN} owners`, () => {
    const chain = Array.from({ length: 20 }, (_, i) => owner({ kind: 'Custom', name: `c${i}`, uid: `c-${i}` }));
    const world = Object.fromEntries(chain.map((o, i) => [o.uid, ok(chain[i + 1]!)]));
    const w = walkChain('ns', [chain[0]!], lookupIn(world).lookup);
    expect(w.chain.items).toHaveLength(MAX_CHAIN);
    expect(w.chain.end.reason).toBe('TooLong');
  });

  it('reports every owner it looked up, so a change in any re-walks the pod', () => {
    expect(walkChain('ns', [rs], lookupIn({ 'rs-1': ok(dep), 'dep-1': ok() }).lookup).through).toEqual(['rs-1', 'dep-1']);
  });
});
