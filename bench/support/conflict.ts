// What a 409 conflict costs an ownership change, measured at the annotation: a slow webhook
// holds each of the agent's writes for `slowMs`, and in a conflicting change another writer
// changes the pod while the agent's PATCH is held, so its resourceVersion precondition fails
// at storage. Each pair is one conflicting and one plain change of the same pod, in
// alternating order, timed the same way: from just before the ownerReferences PATCH is sent to
// the first read of the pod whose annotation names the new owner. The plain change is the
// floor: it pays the slow write once, so a conflict that costs one more write adds `slowMs`.
//
// Used by bench/conflict.ts (the published numbers) and test/e2e/conflict.test.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api } from '@kubernetes/client-node';
import { mergePatch } from '../../localcluster/patch.ts';
import { ANNOTATIONS } from '../../projections/names.ts';
import type { Owner } from './cluster.ts';

export const AGENT_USER = 'system:serviceaccount:ownerrefs-system:ownerrefs-agent';

/** Milliseconds from the ownership change to the annotation, for each change of one pair. */
export interface ConflictPair { conflicting: number; plain: number }

/** A pod on `nodeName` whose container reads the owners' annotation (so the agent keeps it). */
export function readerPod(name: string, nodeName: string) {
  return { metadata: { name }, spec: { nodeName, containers: [{ name: 'c', image: 'busybox',
    env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${ANNOTATIONS.ownerReferences}']` } } }] }] } };
}

/**
 * `pairs` pairs of changes of the pod `name`, each change to a new owner from `owners`
 * (2 × pairs of them, none the pod has now), behind a webhook that holds the agent's writes `slowMs`.
 */
export async function conflictPairs(core: CoreV1Api, o: { namespace: string; name: string; owners: readonly Owner[]; pairs: number; slowMs: number }): Promise<ConflictPair[]> {
  const { namespace, name } = o;
  const annotation = async () => (await core.readNamespacedPod({ name, namespace })).metadata?.annotations?.[ANNOTATIONS.ownerReferences];
  const change = async (owner: Owner, bump: string | undefined) => {
    const started = performance.now();
    await core.patchNamespacedPod({ name, namespace, body: { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.name, uid: owner.uid }] } } }, mergePatch);
    if (bump !== undefined) {
      // Halfway through the agent's held write: its precondition is stale when it lands.
      await sleep(o.slowMs / 2);
      await core.patchNamespacedPod({ name, namespace, body: { metadata: { labels: { bumped: bump } } } }, mergePatch);
    }
    for (;;) {
      if ((await annotation())?.includes(owner.uid)) return performance.now() - started;
      await sleep(5);
    }
  };
  const out: ConflictPair[] = [];
  for (let i = 0; i < o.pairs; i++) {
    const [a, b] = [o.owners[2 * i]!, o.owners[2 * i + 1]!];
    if (i % 2 === 0) {
      const conflicting = await change(a, `${Date.now()}`);
      out.push({ conflicting, plain: await change(b, undefined) });
    } else {
      const plain = await change(a, undefined);
      out.push({ conflicting: await change(b, `${Date.now()}`), plain });
    }
  }
  return out;
}
