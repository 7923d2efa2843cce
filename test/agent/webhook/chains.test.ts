import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../agent/kube/client.ts';
import { AdmissionChains } from '../../../agent/webhook/chains.ts';
import { memoryLogger } from '../../support/agentkit.ts';
import { FakeClock } from '../../support/clock.ts';

const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'rs-1', controller: true };
const deploy = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-1', controller: true };

/** An API of owners' metadata: `answer` per path (an object's metadata, or an error); reads recorded; each answered after `delayMs` of the clock. */
function kit(opts: { delayMs?: number; budgetMs?: number; maxOwners?: number } = {}) {
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
      }, opts.delayMs ?? 1));
    },
    stream: () => Promise.reject(new Error('no watches')),
  };
  const chains = new AdmissionChains({ client: client as never, log: memoryLogger().log, budgetMs: opts.budgetMs ?? 1_000, refreshMs: 60_000, maxOwners: opts.maxOwners ?? 100, clock });
  /** resolve() while the fake clock runs on, 1 ms at a time. */
  const resolve = async (owners = [rs]) => {
    const p = chains.resolve('ns', owners);
    let done = false;
    void p.finally(() => { done = true; });
    for (let i = 0; i < 5_000 && !done; i++) {
      clock.advance(1);
      await new Promise((r) => setImmediate(r));
    }
    return p;
  };
  return { clock, reads, objects, chains, resolve };
}

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
    const k = kit({ maxOwners: 1 });
    await k.resolve();
    expect(k.chains.owners).toBe(1);
    await k.resolve();
    expect(k.reads.length).toBeGreaterThan(2); // evicted, read again
  });
});
