import { describe, expect, it } from 'vitest';
import { ApiError, type ApiClient } from '../../../agent/kube/client.ts';
import { BUILTIN_KINDS, MAX_IN_FLIGHT, OwnerMetadataCache, parseFollowKinds, RETRY_MS } from '../../../agent/owners/ownermeta.ts';
import { walkChain } from '../../../agent/owners/chain.ts';
import { FakeClock } from '../../support/clock.ts';
import { memoryLogger } from '../../support/agentkit.ts';
import { owner } from '../../support/fixtures.ts';

type Obj = { metadata: { uid: string; ownerReferences?: unknown[] } };

/** An API server of owner objects by path; each GET is recorded with its Accept header. */
function fakeApi(objects: Record<string, Obj | ApiError | null>) {
  const gets: { path: string; accept: string | undefined }[] = [];
  const pending: (() => void)[] = [];
  let hold = false;
  const api: ApiClient = {
    json<T>(_m: string, path: string, _b?: unknown, _c?: string, accept?: string): Promise<T> {
      gets.push({ path, accept });
      const answer = () => {
        const o = objects[path.split('?')[0]!];
        return o instanceof ApiError ? Promise.reject(o) : o !== undefined ? Promise.resolve(structuredClone(o) as T) : Promise.reject(new ApiError(404, 'NotFound', 'nf', undefined, 'x'));
      };
      if (!hold) return answer();
      return new Promise<T>((resolve, reject) => pending.push(() => { answer().then(resolve, reject); }));
    },
    stream: () => Promise.reject(new Error('no')),
  };
  return { api, gets, objects, hold: (h: boolean) => { hold = h; }, release: () => { for (const p of pending.splice(0)) p(); } };
}

const RS = '/apis/apps/v1/namespaces/ns/replicasets/web-5d8f';
const DEP = '/apis/apps/v1/namespaces/ns/deployments/web';
const rs = owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-1' });
const dep = owner({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'dep-1' });
const flush = () => new Promise((r) => setTimeout(r, 0));

function cache(api: ApiClient, clock = new FakeClock(), refreshMs = 60_000) {
  const changed: string[] = [];
  const forbidden: string[] = [];
  const c = new OwnerMetadataCache({ client: api, kinds: BUILTIN_KINDS, refreshMs, clock, log: memoryLogger().log,
    changed: (u) => changed.push(u), forbidden: (k) => forbidden.push(k) });
  return { c, changed, forbidden, clock };
}

describe('OwnerMetadataCache', () => {
  it('reads an owner once, metadata only, from the watch cache, and shares it with 2,000 pods', async () => {
    const f = fakeApi({ [RS]: { metadata: { uid: 'rs-1', ownerReferences: [dep] } }, [DEP]: { metadata: { uid: 'dep-1' } } });
    f.hold(true);
    const { c, changed } = cache(f.api);
    for (let i = 0; i < 2000; i++) expect(c.lookup('ns', rs)).toEqual({ state: 'pending' });
    expect(f.gets).toEqual([{ path: `${RS}?resourceVersion=0`, accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1' }]);
    f.release();
    await flush();
    expect(changed).toEqual(['rs-1']);
    for (let i = 0; i < 2000; i++) walkChain('ns', [rs], (ns, r) => c.lookup(ns, r));
    f.release();
    await flush();
    expect(f.gets.map((g) => g.path.split('?')[0])).toEqual([RS, DEP]);
    expect(walkChain('ns', [rs], (ns, r) => c.lookup(ns, r)).chain.items.map((i) => i.name)).toEqual(['web-5d8f', 'web']);
    c.close();
  });

  it('reads an owner in use again after the bound, and says when its own owner changed', async () => {
    const f = fakeApi({ [RS]: { metadata: { uid: 'rs-1', ownerReferences: [dep] } } });
    const { c, changed, clock } = cache(f.api);
    c.lookup('ns', rs);
    await flush();
    f.objects[RS] = { metadata: { uid: 'rs-1', ownerReferences: [] } }; // orphaned (--cascade=orphan)
    clock.advance(30_000);
    c.lookup('ns', rs); // in use
    clock.advance(45_000); // 1.25x the bound since the read
    await flush();
    expect(f.gets).toHaveLength(2);
    expect(changed).toEqual(['rs-1', 'rs-1']);
    expect(c.lookup('ns', rs)).toEqual({ state: 'ok', ownerReferences: [] });
    c.close();
  });

  it('keeps reading an owner a tracked pod still depends on, though nobody looked it up', async () => {
    const f = fakeApi({ [RS]: { metadata: { uid: 'rs-1', ownerReferences: [dep] } } });
    const changed: string[] = [];
    const clock = new FakeClock();
    const c = new OwnerMetadataCache({ client: f.api, kinds: BUILTIN_KINDS, refreshMs: 60_000, clock, log: memoryLogger().log,
      changed: (u) => changed.push(u), inUse: (u) => u === 'rs-1' });
    c.lookup('ns', rs);
    await flush();
    f.objects[RS] = { metadata: { uid: 'rs-1', ownerReferences: [] } };
    for (let i = 0; i < 20; i++) { clock.advance(15_000); await flush(); } // five bounds, no lookups
    expect(c.size).toBe(1);
    expect(changed).toEqual(['rs-1', 'rs-1']);
    c.close();
  });

  it('drops an owner nobody used for two bounds', async () => {
    const f = fakeApi({ [RS]: { metadata: { uid: 'rs-1' } } });
    const { c, clock } = cache(f.api);
    c.lookup('ns', rs);
    await flush();
    clock.advance(150_000);
    expect(c.size).toBe(0);
    c.close();
  });

  it.each([
    { what: 'a deleted owner', answer: new ApiError(404, 'NotFound', 'nf', undefined, 'web-5d8f'), reason: 'NotFound' },
    { what: 'an unserved kind', answer: new ApiError(404, 'NotFound', 'the server could not find the requested resource'), reason: 'NotServed' },
    { what: 'no RBAC for the kind', answer: new ApiError(403, 'Forbidden', 'no'), reason: 'Forbidden' },
    { what: 'another object with the name', answer: { metadata: { uid: 'rs-2' } }, reason: 'UIDMismatch' },
    { what: 'an API server error', answer: new ApiError(500, 'InternalError', 'boom'), reason: 'Unavailable' },
  ])('answers $what with $reason', async ({ answer, reason }) => {
    const f = fakeApi({ [RS]: answer });
    const { c, forbidden } = cache(f.api);
    c.lookup('ns', rs);
    await flush();
    expect(c.lookup('ns', rs)).toMatchObject({ state: 'error', reason });
    expect(forbidden).toEqual(reason === 'Forbidden' ? ['ReplicaSet'] : []);
    c.close();
  });

  it('retries an Unavailable owner soon, not after the whole bound', async () => {
    const f = fakeApi({ [RS]: new ApiError(500, 'InternalError', 'boom') });
    const { c, clock } = cache(f.api);
    c.lookup('ns', rs);
    await flush();
    f.objects[RS] = { metadata: { uid: 'rs-1' } };
    clock.advance(RETRY_MS + 15_000);
    await flush();
    expect(c.lookup('ns', rs)).toEqual({ state: 'ok', ownerReferences: [] });
    c.close();
  });

  it('retries an Unavailable owner within RETRY_MS even when the refresh bound is long, then backs off', async () => {
    const f = fakeApi({ [RS]: new ApiError(503, 'ServiceUnavailable', 'busy') });
    const { c, clock } = cache(f.api, new FakeClock(), 600_000);
    c.lookup('ns', rs);
    await flush();
    expect(f.gets).toHaveLength(1);
    clock.advance(RETRY_MS);
    await flush();
    expect(f.gets).toHaveLength(2);
    clock.advance(RETRY_MS); // the second delay is longer: between one and two RETRY_MS
    await flush();
    clock.advance(RETRY_MS);
    await flush();
    expect(f.gets).toHaveLength(3);
    f.objects[RS] = { metadata: { uid: 'rs-1' } };
    clock.advance(4 * RETRY_MS);
    await flush();
    expect(c.lookup('ns', rs)).toEqual({ state: 'ok', ownerReferences: [] });
    const gets = f.gets.length;
    clock.advance(60_000);
    await flush();
    expect(f.gets).toHaveLength(gets); // answered: no more retries until the refresh
    c.close();
  });

  it.each([['null', null], ['no metadata', {}], ['metadata null', { metadata: null }]])(
    'takes an answer of %s as Unavailable, never as a crash', async (_what, body) => {
      const f = fakeApi({ [RS]: body as never });
      const { c } = cache(f.api);
      c.lookup('ns', rs);
      await flush();
      expect(c.lookup('ns', rs)).toMatchObject({ state: 'error', reason: 'Unavailable', message: expect.stringMatching(/without metadata/) });
      c.close();
    });

  it('keeps two references that share a UID under other names apart: one read each, no loop of reads', async () => {
    const f = fakeApi({ [RS]: { metadata: { uid: 'rs-1' } } });
    const forged = owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'not-web', uid: 'rs-1' });
    const rerender = () => { c.lookup('ns', rs); c.lookup('ns', forged); };
    const changed: string[] = [];
    // Past 50 reads the fake stops answering, so a loop of reads fails the test instead of hanging it.
    const bounded: ApiClient = { ...f.api, json: <T>(...a: Parameters<ApiClient['json']>) => f.gets.length >= 50 ? new Promise<T>(() => {}) : f.api.json<T>(...a) };
    const c = new OwnerMetadataCache({ client: bounded, kinds: BUILTIN_KINDS, refreshMs: 60_000, clock: new FakeClock(), log: memoryLogger().log,
      changed: (u) => { changed.push(u); rerender(); } });
    rerender();
    for (let i = 0; i < 20; i++) await flush();
    expect(f.gets.map((g) => g.path.split('?')[0])).toEqual([RS, '/apis/apps/v1/namespaces/ns/replicasets/not-web']);
    expect(c.lookup('ns', rs)).toEqual({ state: 'ok', ownerReferences: [] });
    expect(c.lookup('ns', forged)).toMatchObject({ state: 'error', reason: 'NotFound' });
    c.close();
  });

  it(`reads at most ${MAX_IN_FLIGHT} owners at once; the others wait their turn`, async () => {
    const f = fakeApi({});
    f.hold(true);
    const { c } = cache(f.api);
    for (let i = 0; i < 20; i++) c.lookup('ns', owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `rs-${i}`, uid: `u${i}` }));
    expect(f.gets).toHaveLength(MAX_IN_FLIGHT);
    f.release();
    for (let i = 0; i < 5; i++) await flush();
    expect(f.gets).toHaveLength(2 * MAX_IN_FLIGHT);
    for (let i = 0; i < 4; i++) {
      f.release();
      for (let j = 0; j < 5; j++) await flush();
    }
    expect(f.gets).toHaveLength(20);
    expect(new Set(f.gets.map((g) => g.path)).size).toBe(20);
    c.close();
  });

  it('tells of an owner evicted past maxEntries while its read was in flight, when the read ends, so its waiters look again', async () => {
    const f = fakeApi({ [RS]: { metadata: { uid: 'rs-1' } }, [DEP]: { metadata: { uid: 'dep-1' } } });
    f.hold(true);
    const changed: string[] = [];
    const c = new OwnerMetadataCache({ client: f.api, kinds: BUILTIN_KINDS, refreshMs: 60_000, clock: new FakeClock(), log: memoryLogger().log,
      changed: (u) => changed.push(u), maxEntries: 1 });
    c.lookup('ns', rs);
    c.lookup('ns', dep); // rs evicted, its GET still in flight
    expect(c.size).toBe(1);
    f.release();
    await flush();
    expect(changed.sort()).toEqual(['dep-1', 'rs-1']);
    expect(c.lookup('ns', rs)).toEqual({ state: 'pending' }); // looked up again: read again
    c.close();
  });

  it('tells of an owner evicted past maxEntries while its read waited its turn, when its turn comes', async () => {
    const f = fakeApi({});
    f.hold(true);
    const changed: string[] = [];
    const c = new OwnerMetadataCache({ client: f.api, kinds: BUILTIN_KINDS, refreshMs: 60_000, clock: new FakeClock(), log: memoryLogger().log,
      changed: (u) => changed.push(u), maxEntries: 1 });
    const ref = (i: number) => owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `rs-${i}`, uid: `u${i}` });
    for (let i = 0; i <= MAX_IN_FLIGHT; i++) c.lookup('ns', ref(i)); // the last one queued
    c.lookup('ns', ref(MAX_IN_FLIGHT + 1)); // evicts it, unread
    f.release();
    for (let i = 0; i < 5; i++) await flush();
    expect(changed).toContain(`u${MAX_IN_FLIGHT}`);
    expect(f.gets.map((g) => g.path)).not.toContain(`/apis/apps/v1/namespaces/ns/replicasets/rs-${MAX_IN_FLIGHT}?resourceVersion=0`); // skipped, not read
    c.close();
  });

  it('does not read kinds off the allow-list', () => {
    const f = fakeApi({});
    const { c } = cache(f.api);
    expect(c.lookup('ns', owner({ apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout' }))).toMatchObject({ state: 'error', reason: 'KindNotFollowed' });
    expect(c.lookup('ns', owner({ apiVersion: 'v1', kind: 'Secret' }))).toMatchObject({ state: 'error', reason: 'KindNotFollowed' });
    // A cluster-scoped kind named by a namespaced object's reference: not read either.
    expect(c.lookup('ns', owner({ apiVersion: 'v1', kind: 'Namespace', name: 'ns' }))).toMatchObject({ state: 'error', reason: 'KindNotFollowed' });
    expect(f.gets).toEqual([]);
    c.close();
  });
});

describe('parseFollowKinds', () => {
  it('reads group/version/Kind=resource lists', () => {
    expect(parseFollowKinds('argoproj.io/v1alpha1/Rollout=rollouts, example.com/v1/Widget=widgets')).toEqual([
      { group: 'argoproj.io', version: 'v1alpha1', kind: 'Rollout', resource: 'rollouts' },
      { group: 'example.com', version: 'v1', kind: 'Widget', resource: 'widgets' },
    ]);
  });
  it.each(['Rollout', 'argoproj.io/v1/rollout=rollouts', 'a/v1/K=../secrets', 'a/v1/K='])('refuses %j', (bad) => {
    expect(() => parseFollowKinds(bad)).toThrow(/group\/version\/Kind=resource/);
  });
});
