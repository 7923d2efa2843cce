// When each pod's annotation is right, for bench:storm: one watch of the storm's namespace
// (as the admin), which notes for every pod the first moment its owner-references
// annotation names exactly the owners its metadata has and the storm asked for. The watch
// is the same observer in every arm, so its own delay is in every arm's numbers alike.

import { createInterface } from 'node:readline';
import type { KubeApiClient } from '../../../agent/kube/client.ts';
import { ANNOTATIONS } from '../../../projections/names.ts';
import { nowMs } from '../stats.ts';

export const OWNERS_ANNOTATION = ANNOTATIONS.ownerReferences;

interface Pod { metadata: { name: string; resourceVersion: string; ownerReferences?: { uid: string }[]; annotations?: Record<string, string> } }

const key = (uids: readonly string[]) => [...uids].sort().join(',');

/** The owners' uids an annotation value names, or undefined when it is absent or not ours. */
export function annotatedOwners(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  try {
    const v = JSON.parse(value) as { items?: { uid?: string }[] };
    return Array.isArray(v.items) ? v.items.map((i) => String(i.uid)) : undefined;
  } catch {
    return undefined;
  }
}

export interface Tracker {
  /** From now, wait for every pod to have exactly `owners` in both its metadata and its annotation. */
  expect(owners: readonly string[]): void;
  /** Pods not yet right. */
  pending(): number;
  /** nowMs() at which each pod became right, since the last expect(). */
  rightAt(): number[];
  /** Per pod right: from when the watch showed its new owners to when it showed the annotation naming them. */
  lagMs(): number[];
  stop(): void;
}

export async function startTracker(api: KubeApiClient, namespace: string): Promise<Tracker> {
  const latest = new Map<string, Pod>();
  let want = '';
  const right = new Map<string, number>();
  const changed = new Map<string, number>();
  const check = (p: Pod) => {
    if (right.has(p.metadata.name)) return;
    const meta = key((p.metadata.ownerReferences ?? []).map((o) => o.uid));
    if (meta !== want) return;
    const now = nowMs();
    if (!changed.has(p.metadata.name)) changed.set(p.metadata.name, now);
    const annotated = annotatedOwners(p.metadata.annotations?.[OWNERS_ANNOTATION]);
    if (annotated && key(annotated) === want) right.set(p.metadata.name, now);
  };
  const ac = new AbortController();
  const relist = async () => {
    const list = await api.json<{ metadata: { resourceVersion: string }; items: Pod[] }>('GET', `/api/v1/namespaces/${namespace}/pods`);
    for (const p of list.items) { latest.set(p.metadata.name, p); check(p); }
    return list.metadata.resourceVersion;
  };
  const watch = async (rv: string) => {
    const res = await api.stream(`/api/v1/namespaces/${namespace}/pods?watch=1&resourceVersion=${rv}`, ac.signal);
    const lines = createInterface({ input: res });
    res.on('error', () => undefined);
    lines.on('error', () => undefined);
    lines.on('line', (l) => {
      const ev = JSON.parse(l) as { type: string; object: Pod };
      if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED') return;
      latest.set(ev.object.metadata.name, ev.object);
      check(ev.object);
    });
    await new Promise<void>((resolve) => lines.once('close', resolve));
  };
  // Watch until the server ends the watch (it drops a watcher too slow for a storm's events), then list and watch again.
  let rv = await relist();
  void (async () => {
    while (!ac.signal.aborted) {
      await watch(rv).catch(() => undefined);
      if (ac.signal.aborted) return;
      await new Promise((r) => setTimeout(r, 200));
      rv = await relist().catch(() => rv);
    }
  })();
  return {
    expect(owners) {
      want = key(owners);
      right.clear();
      changed.clear();
      for (const p of latest.values()) check(p);
    },
    pending: () => latest.size - right.size,
    rightAt: () => [...right.values()],
    lagMs: () => [...right].map(([name, at]) => at - changed.get(name)!),
    stop: () => ac.abort(),
  };
}
