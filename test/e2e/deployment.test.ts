// Scenario 2: a Deployment's pod names its ReplicaSet (direct owners only, as in the KEP).
import { describe, expect, it } from 'vitest';
import { items, podinfoDaemonSet, useE2E } from '../support/e2e.ts';
import { waitFor } from '../../localcluster/wait.ts';

describe('Deployment', () => {
  const e = useE2E('deploy');

  it("names the pod's ReplicaSet, not the Deployment", async () => {
    const template = podinfoDaemonSet('web').spec!.template;
    const dep = await e.apps.createNamespacedDeployment({
      namespace: e.ns,
      body: { metadata: { name: 'web' }, spec: { replicas: 1, selector: { matchLabels: { app: 'web' } }, template } },
    });
    const rs = await waitFor(async () => (await e.apps.listNamespacedReplicaSet({ namespace: e.ns })).items[0],
      { describe: 'the ReplicaSet' });
    expect(rs.metadata!.ownerReferences![0]!.uid).toBe(dep.metadata!.uid);
    const pod = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns })).items.find((p) => p.spec?.nodeName),
      { describe: 'a scheduled pod' });
    const text = await e.waitForFile(pod, (t) => items(t).length > 0, 'has owners');
    expect(items(text)).toEqual([expect.objectContaining({ kind: 'ReplicaSet', name: rs.metadata!.name, uid: rs.metadata!.uid })]);
  });
});
