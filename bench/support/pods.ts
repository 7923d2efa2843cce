// Bench pods: bare pods bound to the bench node (spec.nodeName set, no scheduler), each
// opted in with one emptyDir and owned by one of two ConfigMaps. The bench plays the
// kubelet itself: it creates each pod's volume directory (0777, as the kubelet does)
// right after the pod is created, and never patches status on its own (see
// docs/contributing/benchmarks.md for why the kubelet emulator is not used here).

import { chmod, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { KubeApiClient } from '../../agent/kube/client.ts';
import { project } from '../../projections/index.ts';
import { MERGE, NS, type Owner } from './cluster.ts';
import { nowMs, pool } from './stats.ts';

export const VOLUME = 'podinfo';
/** Requests in flight from the bench (the API client's own socket pool allows 8). */
export const CONCURRENCY = 8;

export interface BenchPod {
  name: string;
  uid: string;
  dir: string;
  owner: Owner;
}

export function volumeDir(kubeletRoot: string, uid: string): string {
  return path.join(kubeletRoot, 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', VOLUME);
}

function ownerRef(o: Owner) {
  return { apiVersion: 'v1', kind: 'ConfigMap', name: o.name, uid: o.uid, controller: true };
}

/** Exactly what the agent must write to `ownerReferences` for this owner. */
export function expectedFile(o: Owner): string {
  const f = project({ metadata: { ownerReferences: [ownerRef(o)] } }).find((x) => x.path === 'ownerReferences')!;
  return f.bytes.toString('utf8');
}

export async function createPods(api: KubeApiClient, kubeletRoot: string, nodeName: string, from: number, to: number, owner: Owner): Promise<BenchPod[]> {
  const idx = Array.from({ length: to - from }, (_, i) => from + i);
  return pool(idx, CONCURRENCY, async (i) => {
    const name = `bench-${String(i).padStart(4, '0')}`;
    const pod = await api.json<{ metadata: { uid: string } }>('POST', `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: 'v1', kind: 'Pod',
      metadata: {
        name, namespace: NS, labels: { app: 'bench', shard: String(i % 10) },
        annotations: { 'ownerrefs.dev/volume': VOLUME },
        ownerReferences: [ownerRef(owner)],
      },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 0,
        containers: [{
          name: 'app', image: 'bench.invalid/app:1',
          volumeMounts: [{ name: VOLUME, mountPath: '/etc/podinfo', readOnly: true }],
        }],
        volumes: [{ name: VOLUME, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
      },
    });
    const dir = volumeDir(kubeletRoot, pod.metadata.uid);
    await mkdir(dir, { recursive: true });
    await chmod(dir, 0o777);
    return { name, uid: pod.metadata.uid, dir, owner };
  });
}

/** Deletes the agent's files, so the next agent start has every file to write. */
export async function clearFiles(pods: readonly BenchPod[]): Promise<void> {
  await pool(pods, 32, async (p) => {
    for (const f of ['ownerReferences', 'ownerReferences.env', 'dependentOwnerReferences']) await rm(path.join(p.dir, f), { force: true });
  });
}

/**
 * Switches every pod's owner to `to` in one burst (CONCURRENCY in flight); returns the
 * CLOCK_MONOTONIC ms at which each write returned, by pod uid, and each write's duration.
 */
export async function switchOwners(api: KubeApiClient, pods: readonly BenchPod[], to: Owner): Promise<{ returned: Map<string, number>; writeMs: number[] }> {
  const returned = new Map<string, number>();
  const writeMs: number[] = [];
  await pool(pods, CONCURRENCY, async (p) => {
    const t = nowMs();
    await api.json('PATCH', `/api/v1/namespaces/${NS}/pods/${p.name}`, { metadata: { ownerReferences: [ownerRef(to)] } }, MERGE);
    const at = nowMs();
    returned.set(p.uid, at);
    writeMs.push(at - t);
    p.owner = to;
  });
  return { returned, writeMs };
}

let churnSeq = 0;

/**
 * One round of updates that leave ownerReferences alone: labels (even rounds) or status
 * (odd). Values are unique per call: a patch that changes nothing makes no watch event.
 */
export async function churn(api: KubeApiClient, pods: readonly BenchPod[], round: number): Promise<void> {
  const now = new Date().toISOString();
  const value = `${round}-${++churnSeq}`;
  await pool(pods, CONCURRENCY, async (p) => {
    if (round % 2 === 0) {
      await api.json('PATCH', `/api/v1/namespaces/${NS}/pods/${p.name}`, { metadata: { labels: { churn: value } } }, MERGE);
    } else {
      await api.json('PATCH', `/api/v1/namespaces/${NS}/pods/${p.name}/status`, {
        status: { conditions: [{ type: 'ownerrefs.dev/bench', status: 'True', lastTransitionTime: now, message: `round ${value}` }] },
      }, MERGE);
    }
  });
}

/** The do-it-yourself approach: each pod GETs itself once at start. */
export async function selfGets(api: KubeApiClient, pods: readonly BenchPod[]): Promise<void> {
  await pool(pods, CONCURRENCY, async (p) => { await api.json('GET', `/api/v1/namespaces/${NS}/pods/${p.name}`); });
}
