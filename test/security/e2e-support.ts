// Helpers for the attacks on the real control plane (*.e2e.test.ts here): hostile pods created straight onto a node
// (spec.nodeName set, no scheduler), their Events, and what is on disk.
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CoreV1Api, CoreV1Event, V1OwnerReference, V1Pod, V1Volume } from '@kubernetes/client-node';
import { waitFor } from '../../localcluster/wait.ts';

export const REASON = 'OwnerRefsProjectionFailed';

export interface PodOpts {
  nodeName: string;
  annotations?: Record<string, string>;
  volumes?: V1Volume[];
  owners?: V1OwnerReference[];
}

/** A pod bound to `nodeName` that opts in with emptyDir "podinfo", unless told otherwise. */
export function podBody(name: string, o: PodOpts): V1Pod {
  return {
    metadata: { name, annotations: { 'ownerrefs.dev/volume': 'podinfo', ...o.annotations }, ownerReferences: o.owners },
    spec: {
      nodeName: o.nodeName,
      terminationGracePeriodSeconds: 0,
      automountServiceAccountToken: false,
      containers: [{ name: 'app', image: 'busybox' }],
      volumes: o.volumes ?? [{ name: 'podinfo', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
    },
  };
}

/** An owner the garbage collector cannot resolve (unknown group), so it never deletes the pod. */
export function fakeOwner(over: Partial<V1OwnerReference> = {}): V1OwnerReference {
  return { apiVersion: 'security.example/v1', kind: 'Thing', name: 'thing', uid: 'uid-1', ...over };
}

export async function projectionEvents(core: CoreV1Api, ns: string, pod: string): Promise<CoreV1Event[]> {
  const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${pod}` });
  return list.items.filter((e) => e.reason === REASON);
}

/** Waits for a Warning OwnerRefsProjectionFailed Event on the pod whose message matches. */
export function waitForEvent(core: CoreV1Api, ns: string, pod: V1Pod, re: RegExp, diagnostics?: () => Promise<string>): Promise<CoreV1Event> {
  return waitFor(async () => (await projectionEvents(core, ns, pod.metadata!.name!))
    .find((e) => e.involvedObject.uid === pod.metadata!.uid && re.test(e.message ?? '')),
  { timeoutMs: 60_000, intervalMs: 200, describe: `Event ${re} on ${pod.metadata!.name}`, ...(diagnostics ? { diagnostics } : {}) });
}

/** Every entry under dir that is not a directory (files, links, FIFOs), sorted. */
export function nonDirectories(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = path.join(d, name);
      if (lstatSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

/** `set -a; . file` in a real shell; returns $OWNER_REFERENCES exactly. */
export function sourceIn(shell: string, env: string, cwd: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sec-e2e-env-'));
  try {
    writeFileSync(path.join(dir, 'env'), env);
    return execFileSync(shell, ['-c', 'set -a; . "$1"; printf %s "$OWNER_REFERENCES"', 'sh', path.join(dir, 'env')], { cwd }).toString('utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Deletes the namespace's pods on a node no kubelet serves (they would otherwise never go). */
export async function forceDeletePods(core: CoreV1Api, ns: string, nodeName: string): Promise<void> {
  const pods = await core.listNamespacedPod({ namespace: ns, fieldSelector: `spec.nodeName=${nodeName}` });
  for (const p of pods.items) {
    await core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: ns, gracePeriodSeconds: 0 }).catch(() => undefined);
  }
}
