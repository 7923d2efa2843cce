// The webhook benchmarks' pods (bench/webhook.ts, bench/surge.ts): a pod in the KEP-4753
// syntax, the same pod without the fields (the floor: the API server admits it without a
// call), and open-loop creates: each is sent when it is due, whether or not earlier ones
// have been answered, and timed from when it was due, so queueing behind slow answers counts.

import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { NS } from './cluster.ts';
import { nowMs } from './stats.ts';

/** A pod in KEP syntax: env and a downwardAPI volume with the owners and two more items. */
export function kepPod(i: number, owner: { name: string; uid: string }): V1Pod {
  return {
    metadata: { name: `wh-${i}`, ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.name, uid: owner.uid }], labels: { app: 'wh' } },
    spec: {
      nodeSelector: { 'ownerrefs.dev/nowhere': 'true' }, // never scheduled: only admission and storage are measured
      containers: [{ name: 'app', image: 'busybox', env: [{ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] }],
      volumes: [{ name: 'podinfo', downwardAPI: { items: [
        { path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } },
        { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
        { path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } },
      ] } }],
    },
  };
}

/** The same pod without the fields the webhook serves: the API server admits it without a call. */
export function plain(pod: V1Pod): V1Pod {
  const c = pod.spec!.containers[0]!;
  const items = pod.spec!.volumes![0]!.downwardAPI!.items!.filter((i) => !i.fieldRef?.fieldPath.includes('ownerReferences'));
  return { ...pod, spec: { ...pod.spec!, containers: [{ ...c, env: [] }], volumes: [{ name: 'podinfo', downwardAPI: { items } }] } };
}

/** One open-loop create: ms from when it was due to its answer, when answered (`doneMs`, on nowMs()), and its error if refused. */
export interface Sent { ms: number; doneMs: number; err?: unknown }

/** Creates `pods` open-loop at `rate` a second; every create's outcome, errors included. */
export async function sendAt(core: CoreV1Api, pods: readonly V1Pod[], rate: number, namespace = NS): Promise<Sent[]> {
  const start = nowMs();
  return Promise.all(pods.map(async (body, i): Promise<Sent> => {
    const due = start + (i * 1000) / rate;
    const wait = due - nowMs();
    if (wait > 0) await sleep(wait);
    let err: unknown;
    try {
      await core.createNamespacedPod({ namespace, body });
    } catch (e) {
      err = e;
    }
    const doneMs = nowMs();
    return { ms: doneMs - due, doneMs, ...err !== undefined ? { err } : {} };
  }));
}

/** As sendAt, for creates that must all succeed: the latencies, ms, or the first error. */
export async function createAt(core: CoreV1Api, pods: readonly V1Pod[], rate: number, namespace = NS): Promise<number[]> {
  const sent = await sendAt(core, pods, rate, namespace);
  const failed = sent.find((s) => 'err' in s);
  if (failed) throw failed.err;
  return sent.map((s) => s.ms);
}
