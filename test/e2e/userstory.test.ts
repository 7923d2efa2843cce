// Scenario 3: the user story. A pod creates a ConfigMap owned by its DaemonSet using
// dependentOwnerReferences; it survives the pod and is collected with the DaemonSet.
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1OwnerReference } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { apiStatus } from '../support/cluster.ts';
import { items, podinfoDaemonSet, useE2E } from '../support/e2e.ts';
import { waitFor } from '../../localcluster/wait.ts';

describe('a pod creating objects owned by its DaemonSet', () => {
  const e = useE2E('story');

  /** Credentials of a ServiceAccount that may create ConfigMaps and nothing on DaemonSets. */
  async function configMapWriter(): Promise<CoreV1Api> {
    const rbac = e.kc.makeApiClient(RbacAuthorizationV1Api);
    await e.core.createNamespacedServiceAccount({ namespace: e.ns, body: { metadata: { name: 'app' } } });
    await rbac.createNamespacedRole({ namespace: e.ns, body: { metadata: { name: 'cm' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'get'] }] } });
    await rbac.createNamespacedRoleBinding({ namespace: e.ns, body: {
      metadata: { name: 'cm' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm' },
      subjects: [{ kind: 'ServiceAccount', name: 'app', namespace: e.ns }],
    } });
    const tr = await e.core.createNamespacedServiceAccountToken({ name: 'app', namespace: e.ns, body: { spec: { audiences: [] } } });
    const cluster = e.kc.getCurrentCluster()!;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: cluster.server, caFile: cluster.caFile, caData: cluster.caData }],
      users: [{ name: 'app', token: tr.status!.token }],
      contexts: [{ name: 'app', cluster: 'c', user: 'app' }],
      currentContext: 'app',
    });
    return kc.makeApiClient(CoreV1Api);
  }

  it('keeps the ConfigMap across pod restarts, collects it with the DaemonSet, and refuses verbatim KEP items', async () => {
    const app = await configMapWriter();
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: podinfoDaemonSet('collector') });
    const pod = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=collector' })).items[0],
      { describe: 'the DaemonSet pod' });
    const kep = await e.waitForFile(pod, (t) => items(t).length === 1, 'names the DaemonSet');

    // What the app does: read the file, create its object with those owners.
    const owners = JSON.parse(e.file(pod, 'dependentOwnerReferences')!) as V1OwnerReference[];
    expect(owners).toEqual([{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'collector', uid: ds.metadata!.uid }]);
    await app.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'state', ownerReferences: owners }, data: { k: 'v' } } });

    // The verbatim KEP items carry blockOwnerDeletion: OwnerReferencesPermissionEnforcement refuses them.
    const verbatim = (JSON.parse(kep) as { items: V1OwnerReference[] }).items;
    const refused = await app.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'verbatim', ownerReferences: verbatim } } })
      .then(() => undefined, (err: unknown) => err);
    expect(apiStatus(refused)).toBe(403);
    expect(String((refused as { body?: unknown }).body ?? refused)).toMatch(/blockOwnerDeletion|finalizers/);

    // A canary owned by the pod: once the garbage collector has removed it, it has
    // processed the pod's deletion, and our ConfigMap must still be there.
    await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'canary', ownerReferences: [
      { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! },
    ] } } });
    await e.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns });
    const replacement = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=collector' }))
      .items.find((p) => p.metadata!.uid !== pod.metadata!.uid), { describe: 'the replacement pod' });
    await waitFor(async () => e.core.readNamespacedConfigMap({ name: 'canary', namespace: e.ns }).then(() => false, (err: unknown) => apiStatus(err) === 404),
      { describe: 'garbage collector removes the pod-owned canary' });
    await e.core.readNamespacedConfigMap({ name: 'state', namespace: e.ns }); // still there
    await e.waitForFile(replacement, (t) => items(t)[0]?.uid === ds.metadata!.uid, 'replacement pod names the DaemonSet');

    // Deleting the DaemonSet lets the real garbage collector delete the ConfigMap.
    await e.apps.deleteNamespacedDaemonSet({ name: 'collector', namespace: e.ns, propagationPolicy: 'Background' });
    await waitFor(async () => e.core.readNamespacedConfigMap({ name: 'state', namespace: e.ns }).then(() => false, (err: unknown) => apiStatus(err) === 404),
      { describe: 'garbage collector removes the ConfigMap with the DaemonSet' });
  });
});
