// Pods whose ownerReferences the test rewrites in bursts, owned by real ConfigMaps
// (owners must exist, or the garbage collector deletes the pods).

import path from 'node:path';
import type { V1ConfigMap, V1Pod } from '@kubernetes/client-node';
import { FILES, project } from '../../projections/index.ts';
import type { E2E } from './e2e.ts';
import { mergePatch } from '../../localcluster/patch.ts';

export interface Burst {
  pods: V1Pod[];
  owners: V1ConfigMap[];
  /** Point every pod at owner i (patches in parallel, retried while the API is down). */
  setOwner(i: number): Promise<void>;
  /** The ownerReferences file for owner i. */
  rendered(i: number): string;
  /** file path -> every acceptable content, for the reader loop. */
  allowed(): Record<string, string[]>;
  /** Pods whose file is not yet the one for owner i. */
  behind(i: number): V1Pod[];
}

async function pool<T>(items: T[], n: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: n }, async () => {
    for (let t = queue.shift(); t !== undefined; t = queue.shift()) await fn(t);
  }));
}

async function retry<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 100) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

export async function startBurst(e: E2E, opts: { pods: number; owners: number; prefix?: string }): Promise<Burst> {
  const prefix = opts.prefix ?? 'burst';
  const owners: V1ConfigMap[] = [];
  for (let i = 0; i < opts.owners; i++) {
    owners.push(await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: `${prefix}-owner-${i}` } } }));
  }
  const ref = (i: number) => ({ apiVersion: 'v1', kind: 'ConfigMap', name: owners[i]!.metadata!.name!, uid: owners[i]!.metadata!.uid! });
  const pods: V1Pod[] = [];
  await pool(Array.from({ length: opts.pods }, (_, i) => i), 8, async (i) => {
    pods.push(await e.core.createNamespacedPod({ namespace: e.ns, body: {
      metadata: { name: `${prefix}-${i}`, annotations: { 'ownerrefs.dev/volume': 'podinfo' }, ownerReferences: [ref(0)] },
      spec: {
        nodeName: e.nodeName, terminationGracePeriodSeconds: 0,
        containers: [{ name: 'app', image: 'busybox' }],
        volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory' } }],
      },
    } }));
  });
  const rendered = (i: number) => project({ metadata: { ownerReferences: [ref(i)] } })
    .find((f) => f.path === FILES.ownerReferences)!.bytes.toString('utf8');
  return {
    pods,
    owners,
    async setOwner(i) {
      await pool(pods, 8, (p) => retry(() => e.core.patchNamespacedPod({
        name: p.metadata!.name!, namespace: e.ns, body: { metadata: { ownerReferences: [ref(i)] } },
      }, mergePatch)));
    },
    rendered,
    allowed() {
      const versions = owners.map((_, i) => rendered(i));
      return Object.fromEntries(pods.map((p) => [path.join(e.kubelet.volumeDir(p.metadata!.uid!, 'podinfo'), FILES.ownerReferences), versions]));
    },
    behind(i) {
      const want = rendered(i);
      return pods.filter((p) => e.file(p) !== want);
    },
  };
}
