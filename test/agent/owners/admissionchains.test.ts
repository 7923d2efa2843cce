import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../agent/kube/client.ts';
import { AdmissionChains } from '../../../agent/owners/admissionchains.ts';
import { memoryLogger } from '../../support/agentkit.ts';
import { FakeClock } from '../../support/clock.ts';

const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'rs-1', controller: true };
const deploy = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-1', controller: true };

/** An API of owners' metadata: `answer` per path (an object's metadata, or an error); reads recorded; each answered after `delayMs` of the clock (or its path's in `delays`). */
function kit(opts: { delayMs?: number; delays?: Record<string, number>; budgetMs?: number; maxOwners?: number } = {}) {
  const clock = new FakeClock();
  const reads: string[] = [];
  const objects: Record<string, unknown> = {
    '/apis/apps/v1/namespaces/ns/replicasets/web-1': { metadata: { uid: 'rs-1', ownerReferences: [deploy] } },
    '/apis/apps/v1/namespaces/ns/deployments/web': { metadata: { uid: 'd-1' } },
  };
  const client = {
    json: (_m: string, p: string) => {
      const path = p.split('?')[0]!;
      reads.push(path);
      return new Promise((resolve, reject) => clock.setTimer(() => {
        const v = objects[path];
        if (v instanceof Error) reject(v);
        else if (v === undefined) reject(new ApiError(404, 'NotFound', 'not found', undefined, path.split('/').pop()));
        else resolve(v);
      }, opts.delays?.[path] ?? opts.delayMs ?? 1));
    },
    stream: () => Promise.reject(new Error('no watches')),
  };
  const chains = new AdmissionChains({ client: client as never, log: memoryLogger().log, budgetMs: opts.budgetMs ?? 1_000, refreshMs: 60_000, maxOwners: opts.maxOwners ?? 100, clock });
  /** `p` once settled, while the fake clock runs on, 1 ms at a time. */
  const pump = async <T>(p: Promise<T>) => {
    let done = false;
    void p.finally(() => { done = true; });
    for (let i = 0; i < 5_000 && !done; i++) {
      clock.advance(1);
      await new Promise((r) => setImmediate(r));
    }
    return p;
  };
  /** resolve() while the fake clock runs on. */
  const resolve = (owners = [rs]) => pump(chains.resolve('ns', owners));
  return { clock, reads, objects, chains, resolve, pump };
}

/** A ReplicaSet with no owner of its own: a chain of one read. */
const leaf = (name: string) => ({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name, uid: `uid-${name}`, controller: true });
const leafPath = (name: string) => `/apis/apps/v1/namespaces/ns/replicasets/${name}`;

describe('AdmissionChains', () => {
  it('walks the chain to its top, reading each owner once, and answers the next pod of the same owners from the cache', async () => {
    const k = kit();
    expect(await k.resolve()).toEqual({ items: [rs, deploy], end: { reason: 'Top', message: 'Deployment web has no controlling owner' } });
    expect(k.reads).toEqual(['/apis/apps/v1/namespaces/ns/replicasets/web-1', '/apis/apps/v1/namespaces/ns/deployments/web']);
    expect((await k.resolve()).end.reason).toBe('Top');
    expect(k.reads).toHaveLength(2);
  });

  it('never waits past its budget: a slow owner read leaves the chain Pending, with what is known', async () => {
    const k = kit({ delayMs: 5_000, budgetMs: 200 });
    const t0 = k.clock.now();
    const chain = await k.resolve();
    expect(k.clock.now() - t0).toBeLessThanOrEqual(201);
    expect(chain).toMatchObject({ items: [rs], end: { reason: 'Pending' } });
  });

  it('ends the chain with the read\'s own reason, never a guess', async () => {
    const k = kit();
    k.objects['/apis/apps/v1/namespaces/ns/deployments/web'] = new ApiError(403, 'Forbidden', 'forbidden');
    expect((await k.resolve()).end.reason).toBe('Forbidden');
    const gone = kit();
    delete gone.objects['/apis/apps/v1/namespaces/ns/replicasets/web-1'];
    expect(await gone.resolve()).toMatchObject({ items: [rs], end: { reason: 'NotFound' } });
  });

  it('holds at most maxOwners owners, the least lately used going first', async () => {
    const k = kit({ maxOwners: 2 });
    for (const n of ['a', 'b', 'c']) k.objects[leafPath(n)] = { metadata: { uid: `uid-${n}` } };
    const held: number[] = [];
    for (const n of ['a', 'b', 'a', 'c', 'a', 'b']) { // a used again before c comes: b goes, not a
      expect((await k.resolve([leaf(n)])).end.reason).toBe('Top');
      held.push(k.chains.owners);
    }
    expect(held).toEqual([1, 2, 2, 2, 2, 2]);
    expect(k.reads).toEqual([leafPath('a'), leafPath('b'), leafPath('c'), leafPath('b')]);
  });

  it('wakes a walk whose owner was evicted while being read as soon as the read ends, not after its budget', async () => {
    const k = kit({ maxOwners: 2, delays: { '/apis/apps/v1/namespaces/ns/replicasets/web-1': 100 } });
    const t0 = k.clock.now();
    const walk = k.chains.resolve('ns', [rs]); // reads web-1: 100 ms
    const others = [k.chains.resolve('ns', [leaf('x1')]), k.chains.resolve('ns', [leaf('x2')])]; // web-1 is evicted for x2
    const chain = await k.pump(walk);
    // Woken at 100 ms (web-1 read, but evicted), it reads web-1 again (100 ms) and then the Deployment.
    expect(chain.end.reason).toBe('Top');
    expect(k.clock.now() - t0).toBeLessThan(300);
    expect(k.reads.filter((p) => p.endsWith('/web-1'))).toHaveLength(2); // it was evicted
    expect((await k.pump(Promise.all(others))).map((c) => c.end.reason)).toEqual(['NotFound', 'NotFound']);
    expect(k.chains.owners).toBeLessThanOrEqual(2);
  });

  it('forgets the owners it waited for once no walk waits any more (ever new owners never grow it)', async () => {
    const k = kit({ delayMs: 5_000, budgetMs: 50 });
    for (let i = 0; i < 20; i++) expect((await k.resolve([leaf(`slow-${i}`)])).end.reason).toBe('Pending');
    expect(k.chains.waiting).toBe(0);
  });
});
