// Smoke test of the e2e harness itself: real controllers, real GC, real
// admission, plus the kubelet emulator's volume directories.
import { stat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  AppsV1Api, CoreV1Api, KubeConfig, RbacAuthorizationV1Api, VersionApi, type V1DaemonSet, type V1Pod,
  type V1PodTemplateSpec,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiStatus, clusterInfo, kubeConfig, newNamespace, waitFor, type TestNamespace } from '../support/cluster.ts';
import type { KubeletEmulator } from '../../localcluster/kubelet/emulator.ts';
import { startEmulatorNode, type EmulatorNode } from '../../localcluster/clusters.ts';

const info = clusterInfo();
const controllersRunning = info.components.controllerManager && info.components.scheduler;

function template(app: string): V1PodTemplateSpec {
  return {
    metadata: { labels: { app } },
    spec: {
      tolerations: [{ operator: 'Exists' }],
      containers: [{ name: 'main', image: 'busybox', command: ['sleep', '3600'] }],
      volumes: [{ name: 'podinfo', emptyDir: {} }],
    },
  };
}

function daemonSet(name: string): V1DaemonSet {
  return {
    metadata: { name },
    spec: { selector: { matchLabels: { app: name } }, template: template(name) },
  };
}

function isReady(pod: V1Pod): boolean {
  return pod.status?.phase === 'Running' &&
    (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

async function gone(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return false;
  } catch (err) {
    if (apiStatus(err) === 404) return true;
    throw err;
  }
}

describe('control plane harness', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let ns: TestNamespace;
  let kubelet: KubeletEmulator;
  let kubeletRoot: string;
  let node: EmulatorNode | undefined;

  beforeAll(async () => {
    kc = kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    apps = kc.makeApiClient(AppsV1Api);
    ns = await newNamespace('cp-smoke', kc);
    node = await startEmulatorNode({ kc, name: info.nodeName });
    kubelet = node.kubelet;
    kubeletRoot = node.kubeletRoot;
  });

  afterAll(async () => {
    await ns?.cleanup(); // while the emulator runs: it finishes the pods' deletion
    await node?.stop();
  });

  it('serves the API and has a Ready, untainted test node', async () => {
    const version = await kc.makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).toMatch(/^v1\./);
    const node = await core.readNode({ name: info.nodeName });
    expect(node.metadata?.labels).toMatchObject({
      'kubernetes.io/hostname': info.nodeName,
      'ownerrefs.dev/agent': 'true',
    });
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.status).toBe('True');
    expect(node.status?.allocatable).toMatchObject({ cpu: '8', memory: '32Gi', pods: '250' });
    expect(node.spec?.taints ?? []).not.toContainEqual(expect.objectContaining({ key: 'node.kubernetes.io/not-ready' }));
  });

  it.runIf(controllersRunning)('runs a DaemonSet pod on the node and garbage-collects it with its owner', async () => {
    const ds = await apps.createNamespacedDaemonSet({ namespace: ns.name, body: daemonSet('ds-smoke') });
    const pod = await waitFor(async () => {
      const pods = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=ds-smoke' });
      return pods.items.find((p) => p.spec?.nodeName === info.nodeName && isReady(p));
    }, { describe: 'DaemonSet pod bound to the test node and Running' });

    expect(pod.metadata?.ownerReferences).toEqual([expect.objectContaining({
      apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'ds-smoke', uid: ds.metadata!.uid,
      controller: true, blockOwnerDeletion: true,
    })]);
    const uid = pod.metadata!.uid!;
    const dir = await kubelet.waitForVolumeDir(uid, 'podinfo');
    expect(dir).toBe(join(kubeletRoot, 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'));
    expect((await stat(dir)).mode & 0o777).toBe(0o777);

    await apps.deleteNamespacedDaemonSet({ name: 'ds-smoke', namespace: ns.name, propagationPolicy: 'Background' });
    await waitFor(() => gone(() => core.readNamespacedPod({ name: pod.metadata!.name!, namespace: ns.name })),
      { describe: 'garbage collector deletes the DaemonSet pod (kubelet emulator confirms)' });
    expect(existsSync(kubelet.podDir(uid))).toBe(false);
  });

  it.runIf(controllersRunning)('builds a Deployment -> ReplicaSet -> Pod chain and deletes it in the foreground', async () => {
    const deploy = await apps.createNamespacedDeployment({
      namespace: ns.name,
      body: {
        metadata: { name: 'web' },
        spec: { replicas: 1, selector: { matchLabels: { app: 'web' } }, template: template('web') },
      },
    });
    const rs = await waitFor(async () => {
      const list = await apps.listNamespacedReplicaSet({ namespace: ns.name, labelSelector: 'app=web' });
      return list.items[0];
    }, { describe: 'ReplicaSet of Deployment web' });
    expect(rs.metadata?.ownerReferences).toEqual([expect.objectContaining({
      kind: 'Deployment', name: 'web', uid: deploy.metadata!.uid, controller: true, blockOwnerDeletion: true,
    })]);
    const pod = await waitFor(async () => {
      const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
      return list.items.find((p) => p.spec?.nodeName === info.nodeName && isReady(p));
    }, { describe: 'Deployment pod scheduled and Running' });
    expect(pod.metadata?.ownerReferences).toEqual([expect.objectContaining({
      kind: 'ReplicaSet', name: rs.metadata!.name, uid: rs.metadata!.uid, controller: true,
    })]);
    await kubelet.waitForVolumeDir(pod.metadata!.uid!, 'podinfo');
    await waitFor(async () => (await apps.readNamespacedDeployment({ name: 'web', namespace: ns.name }))
      .status?.availableReplicas === 1, { describe: 'Deployment web available' });

    // Foreground: the Deployment stays until every blocking dependent is gone.
    await apps.deleteNamespacedDeployment({ name: 'web', namespace: ns.name, propagationPolicy: 'Foreground' });
    await waitFor(() => gone(() => apps.readNamespacedDeployment({ name: 'web', namespace: ns.name })),
      { describe: 'foreground deletion of Deployment web completes' });
    expect(await gone(() => core.readNamespacedPod({ name: pod.metadata!.name!, namespace: ns.name }))).toBe(true);
    expect(await gone(() => apps.readNamespacedReplicaSet({ name: rs.metadata!.name!, namespace: ns.name }))).toBe(true);
  });

  it('enforces OwnerReferencesPermissionEnforcement for a token-authenticated ServiceAccount', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    // No pods needed: the DaemonSet is only an owner to point at.
    const owner = await apps.createNamespacedDaemonSet({
      namespace: ns.name,
      body: { ...daemonSet('owner'), spec: { ...daemonSet('owner').spec!, template: {
        ...template('owner'), spec: { ...template('owner').spec!, nodeSelector: { 'ownerrefs.dev/none': 'x' } },
      } } },
    });
    await core.createNamespacedServiceAccount({ namespace: ns.name, body: { metadata: { name: 'limited' } } });
    await rbac.createNamespacedRole({ namespace: ns.name, body: {
      metadata: { name: 'configmap-creator' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['create'] }],
    } });
    await rbac.createNamespacedRoleBinding({ namespace: ns.name, body: {
      metadata: { name: 'limited-configmap-creator' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-creator' },
      subjects: [{ kind: 'ServiceAccount', name: 'limited', namespace: ns.name }],
    } });
    const tr = await core.createNamespacedServiceAccountToken({
      name: 'limited', namespace: ns.name, body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const token = tr.status?.token;
    expect(token).toBeTruthy();

    const limited = new KubeConfig();
    limited.loadFromOptions({
      clusters: [{ name: 'test', server: info.server, caFile: info.caPath, skipTLSVerify: false }],
      users: [{ name: 'limited', token }],
      contexts: [{ name: 'test', cluster: 'test', user: 'limited' }],
      currentContext: 'test',
    });
    const limitedCore = limited.makeApiClient(CoreV1Api);
    const ref = { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'owner', uid: owner.metadata!.uid! };

    // Succeeds once the RoleBinding has reached the RBAC authorizer's cache,
    // which also proves the refusal below is about the ownerReference.
    await waitFor(async () => limitedCore.createNamespacedConfigMap({ namespace: ns.name, body: {
      metadata: { name: 'plain-ref', ownerReferences: [ref] }, data: { a: 'b' },
    } }), { describe: 'limited SA creates a ConfigMap with a non-blocking ownerReference' });

    const refused = await limitedCore.createNamespacedConfigMap({ namespace: ns.name, body: {
      metadata: { name: 'blocking-ref', ownerReferences: [{ ...ref, blockOwnerDeletion: true }] },
    } }).then(() => undefined, (err: unknown) => err);
    expect(apiStatus(refused)).toBe(403);
    const body = (refused as { body?: unknown }).body;
    expect(typeof body === 'string' ? body : JSON.stringify(body)).toContain('blockOwnerDeletion');
  });

  // Skipped, and reported as skipped, when the binaries have no controller-manager (envtest's).
  it.runIf(info.components.controllerManager)('garbage-collects a dependent whose owner reference does not block deletion', async () => {
    const owner = await apps.createNamespacedDaemonSet({
      namespace: ns.name,
      body: { ...daemonSet('gc-owner'), spec: { ...daemonSet('gc-owner').spec!, template: {
        ...template('gc-owner'), spec: { ...template('gc-owner').spec!, nodeSelector: { 'ownerrefs.dev/none': 'x' } },
      } } },
    });
    await core.createNamespacedConfigMap({ namespace: ns.name, body: {
      metadata: { name: 'gc-dependent', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'gc-owner', uid: owner.metadata!.uid! }] },
    } });
    await apps.deleteNamespacedDaemonSet({ name: 'gc-owner', namespace: ns.name, propagationPolicy: 'Background' });
    await waitFor(() => gone(() => core.readNamespacedConfigMap({ name: 'gc-dependent', namespace: ns.name })),
      { describe: 'garbage collector deletes the ConfigMap owned by DaemonSet gc-owner' });
  });
});
