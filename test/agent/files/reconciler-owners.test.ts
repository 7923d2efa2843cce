// Files beyond the KEP through the reconciler: the Node as owner, and the controller chain
// on a node that follows owners, kept current as owners are read and change.

import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { targetFor } from '../../../agent/files/csi/paths.ts';

import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError, type ApiClient } from '../../../agent/kube/client.ts';
import { DEFAULT_SETTINGS } from '../../../agent/node/nodeconfig.ts';
import { BUILTIN_KINDS, OwnerMetadataCache } from '../../../agent/owners/ownermeta.ts';
import { realClock } from '../../../agent/common/clock.ts';
import { FILES } from '../../../projections/index.ts';
import { waitFor } from '../../../localcluster/wait.ts';
import { agentKit, memoryLogger } from '../../support/agentkit.ts';
import { owner, pod } from '../../support/fixtures.ts';
import { makeVolume } from '../../support/tmpdir.ts';
import { type PodView } from '../../../agent/node/podview.ts';

const RS = '/apis/apps/v1/namespaces/default/replicasets/web-5d8f';
const DEP = '/apis/apps/v1/namespaces/default/deployments/web';
const rs = owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-1' });
const dep = owner({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'dep-1' });
const FOLLOW = { ...DEFAULT_SETTINGS, followOwners: true };

function world() {
  const objects: Record<string, unknown> = { [RS]: { metadata: { uid: 'rs-1', ownerReferences: [dep] } }, [DEP]: { metadata: { uid: 'dep-1' } } };
  const gets: string[] = [];
  const api: ApiClient = {
    json<T>(_m: string, p: string): Promise<T> {
      gets.push(p.split('?')[0]!);
      const o = objects[p.split('?')[0]!];
      return o ? Promise.resolve(structuredClone(o) as T) : Promise.reject(new ApiError(404, 'NotFound', 'nf', undefined, 'x'));
    },
    stream: () => Promise.reject(new Error('no')),
  };
  return { api, objects, gets };
}

function kit(refreshMs = 60_000, csiDriver?: string) {
  const w = world();
  let onChange = (_uid: string) => {};
  const cache = new OwnerMetadataCache({ client: w.api, kinds: BUILTIN_KINDS, refreshMs, clock: realClock, log: memoryLogger().log, changed: (u) => onChange(u) });
  const k = agentKit({ owners: cache, ...(csiDriver ? { csiDriver } : {}) });
  onChange = (u) => k.reconciler.ownerChanged(u);
  return { ...w, k, cache };
}

const read = (vol: string, name: string) => (existsSync(path.join(vol, name)) ? readFileSync(path.join(vol, name), 'utf8') : undefined);

describe('files beyond the KEP', () => {
  it('nodeOwnerReferences names the Node once it is known, and goes when the label turns it off', async () => {
    const k = agentKit();
    const p = pod();
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await k.reconciler.idle();
    expect(read(vol, FILES.node)).toBeUndefined();
    k.reconciler.setNode({ name: 'worker-1', uid: 'n-1' });
    await waitFor(() => read(vol, FILES.node) === '[{"apiVersion":"v1","kind":"Node","name":"worker-1","uid":"n-1"}]' || undefined);
    k.reconciler.setSettings({ ...DEFAULT_SETTINGS, nodeFile: false });
    await waitFor(() => read(vol, FILES.node) === undefined || undefined);
  });

  it('following owners: the chain reaches the Deployment after one read of each owner, and the workload file names it', async () => {
    const { k, gets, cache } = kit();
    k.reconciler.setSettings(FOLLOW);
    const p = pod({ owners: [rs] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => read(vol, FILES.workload) === '[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"dep-1"}]' || undefined, { describe: 'the workload file' });
    expect(JSON.parse(read(vol, FILES.chain)!)).toMatchObject({ items: [{ kind: 'ReplicaSet' }, { kind: 'Deployment' }], end: { reason: 'Top' } });
    expect(gets).toEqual([RS, DEP]);
    cache.close();
  });

  it('2,000 pods of one ReplicaSet cost two reads on the node', async () => {
    const { k, gets, cache } = kit();
    k.reconciler.setSettings(FOLLOW);
    for (let i = 0; i < 2000; i++) k.reconciler.upsert(pod({ owners: [rs] }));
    await waitFor(() => gets.length === 2 || undefined);
    await k.reconciler.idle();
    await new Promise((r) => setTimeout(r, 50));
    expect(gets).toEqual([RS, DEP]);
    cache.close();
  });

  it("an owner's own change of owner reaches the files when it is read again", async () => {
    const { k, objects, cache } = kit(1_000);
    k.reconciler.setSettings(FOLLOW);
    const p = pod({ owners: [rs] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => read(vol, FILES.workload)?.includes('"Deployment"') || undefined);
    objects[RS] = { metadata: { uid: 'rs-1', ownerReferences: [] } }; // kubectl delete deployment --cascade=orphan
    await waitFor(() => read(vol, FILES.workload)?.includes('"ReplicaSet"') || undefined, { describe: 'the top moves to the ReplicaSet', timeoutMs: 10_000 });
    cache.close();
  });

  it('turning following off removes the chain files; the KEP file stays', async () => {
    const { k, cache } = kit();
    k.reconciler.setSettings(FOLLOW);
    const p = pod({ owners: [rs] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => read(vol, FILES.chain) || undefined);
    k.reconciler.setSettings(DEFAULT_SETTINGS);
    await waitFor(() => (read(vol, FILES.chain) === undefined && read(vol, FILES.workload) === undefined) || undefined);
    expect(read(vol, FILES.ownerReferences)).toContain('"ReplicaSet"');
    cache.close();
  });
});

/** An agent whose owner reads wait until `release()` (then answer from `objects`, or fail with `fail`). */
function heldKit(root?: string) {
  const w = world();
  const waiting: (() => void)[] = [];
  let fail: ApiError | undefined;
  const api: ApiClient = {
    json: <T>(m: string, p: string, ...rest: unknown[]) => new Promise<T>((resolve, reject) => {
      waiting.push(() => (fail ? reject(fail) : (w.api.json<T>(m as 'GET', p, ...(rest as [])).then(resolve, reject))));
    }),
    stream: w.api.stream,
  };
  let onChange = (_uid: string) => {};
  const cacheLog = memoryLogger();
  const cache = new OwnerMetadataCache({ client: api, kinds: BUILTIN_KINDS, refreshMs: 60_000, clock: realClock, log: cacheLog.log, changed: (u) => onChange(u) });
  const k = agentKit({ owners: cache, ...(root ? { root } : {}) });
  onChange = (u) => k.reconciler.ownerChanged(u);
  k.reconciler.setSettings(FOLLOW);
  const release = () => { for (const go of waiting.splice(0)) go(); };
  return { ...w, k, cache, cacheLines: cacheLog.lines, release, failWith: (e: ApiError) => (fail = e), waiting: () => waiting.length };
}

describe('an owner not read yet leaves the chain files in place', () => {
  const WORKLOAD = '[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"dep-1"}]';
  async function firstAgent() {
    const a = heldKit();
    const p = pod({ owners: [rs] });
    const vol = makeVolume(a.k.root, p.metadata!.uid!);
    a.k.reconciler.upsert(p);
    await waitFor(() => a.waiting() > 0 || undefined);
    a.release();
    await waitFor(() => a.waiting() > 0 || undefined); // the ReplicaSet's owner, the Deployment
    a.release();
    await waitFor(() => read(vol, FILES.workload) === WORKLOAD || undefined, { describe: 'the first agent\'s workload file' });
    await a.k.reconciler.close();
    a.cache.close();
    return { p, vol, root: a.k.root, chain: read(vol, FILES.chain)!, inode: statSync(path.join(vol, FILES.chain)).ino };
  }

  it('a restarted agent keeps them while it reads the owners, and rewrites nothing when they agree', async () => {
    const first = await firstAgent();
    const b = heldKit(first.root);
    b.k.reconciler.replace([first.p]);
    await waitFor(() => b.waiting() > 0 || undefined);
    await b.k.reconciler.idle();
    expect(read(first.vol, FILES.workload)).toBe(WORKLOAD); // not [] while Pending
    expect(read(first.vol, FILES.chain)).toBe(first.chain);
    b.release();
    await waitFor(() => b.waiting() > 0 || undefined);
    b.release();
    await waitFor(() => b.cache.size === 2 && b.waiting() === 0 || undefined);
    await new Promise((r) => setTimeout(r, 50));
    await b.k.reconciler.idle();
    expect(statSync(path.join(first.vol, FILES.chain)).ino).toBe(first.inode); // the same file: never rewritten
    expect(read(first.vol, FILES.workload)).toBe(WORKLOAD);
    b.cache.close();
  });

  it('a failing read (Unavailable) keeps them too', async () => {
    const first = await firstAgent();
    const b = heldKit(first.root);
    b.failWith(new ApiError(503, 'ServiceUnavailable', 'busy', undefined, 'x'));
    b.k.reconciler.replace([first.p]);
    await waitFor(() => b.waiting() > 0 || undefined);
    b.release();
    await waitFor(() => b.cacheLines.some((l) => l.msg === 'reading an owner failed; retrying') || undefined);
    await new Promise((r) => setTimeout(r, 50)); // the failure re-renders the pod: Unavailable
    await b.k.reconciler.idle();
    expect(read(first.vol, FILES.workload)).toBe(WORKLOAD);
    expect(read(first.vol, FILES.chain)).toBe(first.chain);
    b.cache.close();
  });

  it('after an adoption the old chain goes at once: Pending names the new owner, the workload is unknown', async () => {
    const first = await firstAgent();
    const b = heldKit(first.root);
    const rs2 = owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-77aa', uid: 'rs-2' });
    b.k.reconciler.replace([{ ...first.p, metadata: { ...first.p.metadata, ownerReferences: [rs2] } }]);
    await waitFor(() => read(first.vol, FILES.workload) === '[]' || undefined, { describe: 'the old workload gone' });
    expect(JSON.parse(read(first.vol, FILES.chain)!)).toMatchObject({ items: [{ uid: 'rs-2' }], end: { reason: 'Pending' } });
    b.cache.close();
  });
});

describe('a KEP-syntax volume asking for the files beyond the KEP', () => {
  it('gets the chain, the workload and the Node as items, live', async () => {
    const { k, cache } = kit(60_000, 'ownerrefs.dev');
    k.reconciler.setSettings(FOLLOW);
    k.reconciler.setNode({ name: 'worker-1', uid: 'n-1' });
    const base = pod({ owners: [rs], annotation: undefined });
    const p = { ...base, spec: { volumes: [{ name: 'podinfo', csi: { driver: 'ownerrefs.dev', volumeAttributes: { downwardAPI: JSON.stringify({ items: [
      { path: 'workload', fieldRef: { fieldPath: 'ownerrefs.dev/workloadOwnerReferences' } },
      { path: 'node', fieldRef: { fieldPath: 'ownerrefs.dev/nodeOwnerReferences' } }] }) } } }] } };
    k.reconciler.upsert(p as PodView);
    const t = targetFor(k.root, p.metadata!.uid!, 'podinfo');
    mkdirSync(path.join(k.root, ...t.target.components.slice(0, -1)), { recursive: true });
    expect(await k.reconciler.publish(t.diskUid, 'podinfo', t.target)).toBe(true);
    const dir = path.join(k.root, ...t.target.components);
    await waitFor(() => read(dir, 'workload') === '[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"dep-1"}]' || undefined, { describe: 'the workload item' });
    expect(read(dir, 'node')).toBe('[{"apiVersion":"v1","kind":"Node","name":"worker-1","uid":"n-1"}]');
    cache.close();
  });
});
