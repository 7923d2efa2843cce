// Scenario 1: the real DaemonSet controller adopts and orphans a pod; the file follows.
import { describe, expect, it } from 'vitest';
import { items, podinfoDaemonSet, useE2E } from '../support/e2e.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { waitFor } from '../../localcluster/wait.ts';

const EMPTY = '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}';

describe('DaemonSet adoption and orphaning', () => {
  const e = useE2E('ds');

  it('names the DaemonSet, empties on orphaning, and names it again on re-adoption', async () => {
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: podinfoDaemonSet('podinfo') });
    const pod = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=podinfo' })).items[0],
      { describe: 'the DaemonSet pod' });
    const named = (t: string) => items(t).some((i) => i.kind === 'DaemonSet' && i.uid === ds.metadata!.uid);

    const text = await e.waitForFile(pod, named, 'names the DaemonSet');
    expect(text).toBe('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"apiVersion":"apps/v1","kind":"DaemonSet",' +
      `"name":"podinfo","uid":"${ds.metadata!.uid}","controller":true,"blockOwnerDeletion":true}]}`);
    expect(e.file(pod, 'dependentOwnerReferences')).toBe(`[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"podinfo","uid":"${ds.metadata!.uid}"}]`);
    expect(e.file(pod, 'ownerReferences.env')).toBe(`OWNER_REFERENCES='${text}'\n`);

    // On re-adoption the controller keeps the oldest of two daemon pods, comparing
    // creation timestamps at one-second resolution (ties go by name). Let a second pass
    // so the replacement it creates on orphaning is strictly younger.
    const created = new Date(pod.metadata!.creationTimestamp!).getTime();
    await waitFor(() => Date.now() >= created + 1_100, { describe: 'a new second on the API server clock' });

    // The selector no longer matches: the controller releases the pod.
    await e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app: 'elsewhere' } } } }, mergePatch);
    await e.waitForFile(pod, (t) => t === EMPTY, 'items:[] after orphaning');
    expect(e.file(pod, 'dependentOwnerReferences')).toBe('[]');

    // Matching again: the controller adopts it (and, keeping the oldest, removes its replacement).
    await e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app: 'podinfo' } } } }, mergePatch);
    await e.waitForFile(pod, named, 'names the DaemonSet again after adoption');
  });
});
