// On a real node: the kubelet with containerd and runc, containers reading the files
// (through exec and logs via the API server), the agent as a host process on the node's
// kubelet root, in emptyDir mode and as the kubelet's CSI driver at once.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, StorageV1Api, type V1DaemonSet, type V1Deployment, type V1OwnerReference, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { mergePatch } from '../../localcluster/patch.ts';
import { apiStatus } from '../support/cluster.ts';
import { items } from '../support/e2e.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';

const READ = ['cat', '/etc/podinfo/ownerReferences'];
const container = (command: string[]) => ({
  // IfNotPresent: the real node has the image imported, a hollow node's fake runtime "pulls" it.
  name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command,
  volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }],
});

function daemonSet(name: string, serviceAccountName?: string): V1DaemonSet {
  return { metadata: { name }, spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name }, annotations: { 'ownerrefs.dev/volume': 'podinfo' } }, spec: {
      ...(serviceAccountName ? { serviceAccountName } : {}),
      terminationGracePeriodSeconds: 1, containers: [container(['sleep', '3600'])],
      volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
    } },
  } };
}

/** Its container prints what it finds at its very first instruction, then waits (the log keeps a line once it ends). */
function csiDeployment(name: string): V1Deployment {
  return { metadata: { name }, spec: {
    replicas: 1, selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: {
      terminationGracePeriodSeconds: 1,
      containers: [container(['sh', '-c', 'cat /etc/podinfo/ownerReferences || echo MISSING; echo; exec sleep 3600'])],
      volumes: [{ name: 'podinfo', csi: { driver: 'ownerrefs.dev', readOnly: true } }],
    } },
  } };
}

describe(CONTAINERS ? 'on a real node (kubelet, containerd, runc)' : 'on a hollow node (no real node on this machine)', () => {
  const e = useRealNode('real', {
    agentArgs: (node) => [`--csi-socket=${path.join(node.kubeletRoot, 'plugins', 'ownerrefs.dev', 'csi.sock')}`,
      `--registration-dir=${path.join(node.kubeletRoot, 'plugins_registry')}`],
  });
  const running = (selector: string) => e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector }))
    .items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp), `a Running pod ${selector}`);
  const readInside = (pod: V1Pod, want: (names: string[]) => boolean, what: string) =>
    e.waitFor(async () => {
      const names = items(await e.exec(pod, READ)).map((i) => i.name);
      return want(names) ? names : undefined;
    }, `${pod.metadata!.name}: ${what}, read from inside the container`);

  it('doctor finds the CSI driver registered by the real kubelet (with admin credentials: it may read CSINodes)', async () => {
    const kubeletRoot = e.node.kubeletRoot;
    // The kubelet registers the driver a moment after the agent starts (doctor would rightly say FAIL before).
    const storage = e.kc.makeApiClient(StorageV1Api);
    await e.waitFor(async () => (await storage.readCSINode({ name: e.node.name }).catch(() => undefined))?.spec.drivers.some((d) => d.name === 'ownerrefs.dev') || undefined,
      'the kubelet registers ownerrefs.dev');
    const out = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, [path.join(import.meta.dirname, '..', '..', 'agent', 'main.ts'), 'doctor', `--node-name=${e.node.name}`, `--kubeconfig=${e.cp.kubeconfigPath}`,
        `--kubelet-root=${kubeletRoot}`, `--csi-socket=${path.join(kubeletRoot, 'plugins', 'ownerrefs.dev', 'csi.sock')}`, `--registration-dir=${path.join(kubeletRoot, 'plugins_registry')}`],
      (err, stdout) => resolve({ code: err ? Number((err as { code?: number }).code) : 0, out: stdout }));
    });
    expect(out.out).toMatch(/^OK   CSI socket: /m);
    expect(out.out).toMatch(/^OK   CSI registration socket: /m);
    expect(out.out).toMatch(/^OK   CSI driver registered with the kubelet: CSINode \S+ lists ownerrefs.dev/m);
    expect(out.out).toMatch(/^OK   CSIDriver object: /m);
    expect(out.out).toMatch(/^WARN RBAC: the agent may also get secrets/m); // admin credentials: more than the agent's
    expect(out.out).toMatch(/^FAIL token: the credentials name no node/m); // and no token bound to the agent's pod
    expect(out.code).toBe(1);
  });

  it("a DaemonSet pod's container reads its owners, orphaned and adopted again", async () => {
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: daemonSet('podinfo') });
    const pod = await running('app=podinfo');
    await readInside(pod, (n) => n.join() === 'podinfo', 'names the DaemonSet');
    // Every file, byte for byte, as the container sees it.
    const kep = '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"apiVersion":"apps/v1","kind":"DaemonSet",' +
      `"name":"podinfo","uid":"${ds.metadata!.uid}","controller":true,"blockOwnerDeletion":true}]}`;
    expect(await e.exec(pod, READ)).toBe(kep);
    expect(await e.exec(pod, ['cat', '/etc/podinfo/dependentOwnerReferences'])).toBe(`[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"podinfo","uid":"${ds.metadata!.uid}"}]`);
    expect(await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences.env'])).toBe(`OWNER_REFERENCES='${kep}'\n`);
    if (CONTAINERS) expect(await e.exec(pod, ['sh', '-c', '. /etc/podinfo/ownerReferences.env && printf %s "$OWNER_REFERENCES"'])).toBe(kep);
    // On re-adoption the controller keeps the older of two daemon pods, by creation time at
    // one-second resolution (ties by name): a new second, so the replacement it makes is younger.
    const created = new Date(pod.metadata!.creationTimestamp!).getTime();
    await e.waitFor(() => Date.now() >= created + 1_100, 'a new second');
    const relabel = (app: string) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app } } } }, mergePatch);
    await relabel('elsewhere');
    await readInside(pod, (n) => n.length === 0, 'orphaned: no owner');
    expect(await e.exec(pod, ['cat', '/etc/podinfo/dependentOwnerReferences'])).toBe('[]');
    await relabel('podinfo');
    await readInside(pod, (n) => n.join() === 'podinfo', 'adopted again');
  });

  it.runIf(CONTAINERS)('a CSI volume has the files at the container\'s first instruction, read-only, and is unpublished with the pod', async () => {
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: csiDeployment('csi') });
    const pod = await running('app=csi');
    const rs = pod.metadata!.ownerReferences![0]!; // the ReplicaSet, not the Deployment: direct owners, as in the KEP
    const first = await e.waitFor(async () => (await e.core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: e.ns })) || undefined, 'the container\'s first output');
    expect(items(first.trim())).toEqual([expect.objectContaining({ kind: 'ReplicaSet', name: rs.name, uid: rs.uid })]);
    await expect(e.exec(pod, ['touch', '/etc/podinfo/x'])).rejects.toThrow(/Read-only file system/);
    // Log lines reach the test through a pipe: wait for them rather than race the agent's stdout.
    await e.waitFor(() => e.agent.lines.some((l) => l.msg === 'registered with the kubelet') || undefined, 'the agent logs its registration');

    const target = path.join(e.node.kubeletRoot, 'pods', pod.metadata!.uid!, 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount');
    expect(existsSync(path.join(target, 'ownerReferences'))).toBe(true);
    await e.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns });
    await e.waitFor(() => !existsSync(target), 'the kubelet unpublishes the volume and the agent removes its files');
    await e.waitFor(() => e.agent.lines.some((l) => l.msg === 'csi volume unpublished' && l.podUID === pod.metadata!.uid) || undefined,
      'the agent logs the unpublish');
  });

  it.runIf(CONTAINERS)('keeps serving while the kubelet restarts and reconstructs its volumes', async () => {
    const pod = await running('app=podinfo');
    await e.node.restartKubelet();
    const relabel = (app: string) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app } } } }, mergePatch);
    await relabel('after-restart');
    await readInside(pod, (n) => n.length === 0, 'orphaned after the kubelet restart');
    const csi = await running('app=csi'); // the Deployment's replacement, published by the restarted kubelet
    await e.waitFor(async () => (await e.core.readNamespacedPodLog({ name: csi.metadata!.name!, namespace: e.ns })).includes('"kind":"ReplicaSet"') || undefined,
      'the replacement CSI pod read its owner at start');
  });

  it.runIf(CONTAINERS)('an agent restarted while CSI volumes are published keeps them current', async () => {
    const pod = await running('app=csi');
    await e.agent.stop();
    await e.restartAgent(); // finds the published target from the kubelet's vol_data.json
    expect(e.agent.lines.some((l) => l.msg === 'csi volumes published before the restart are kept current again')).toBe(true);
    await e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app: 'csi-orphan' } } } }, mergePatch);
    await readInside(pod, (n) => n.length === 0, 'orphaned by its ReplicaSet, after the agent restart');
  });

  it('the user story: a ConfigMap owned by the DaemonSet through the file read in the container outlives the pod, and goes with the DaemonSet', async () => {
    const app = await configMapWriter();
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: daemonSet('collector', 'app') });
    const pod = await running('app=collector');
    await readInside(pod, (n) => n.join() === 'collector', 'names the DaemonSet');
    // What the app does: read the file, create its object with those owners (its own token: ConfigMaps only).
    const owners = JSON.parse(await e.exec(pod, ['cat', '/etc/podinfo/dependentOwnerReferences'])) as V1OwnerReference[];
    expect(owners).toEqual([{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'collector', uid: ds.metadata!.uid }]);
    await app.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'state', ownerReferences: owners }, data: { k: 'v' } } });
    // The verbatim KEP items carry blockOwnerDeletion: OwnerReferencesPermissionEnforcement refuses them to this account.
    const verbatim = (JSON.parse(await e.exec(pod, READ)) as { items: V1OwnerReference[] }).items;
    const refused = await app.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'verbatim', ownerReferences: verbatim } } })
      .then(() => undefined, (err: unknown) => err);
    expect(apiStatus(refused)).toBe(403);
    // A canary owned by the pod: once the garbage collector has removed it, it has processed the
    // pod's deletion (by the real kubelet), and the ConfigMap must still be there.
    await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'canary', ownerReferences: [
      { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! },
    ] } } });
    await e.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns });
    const gone = (name: string) => e.core.readNamespacedConfigMap({ name, namespace: e.ns }).then(() => false, (err: unknown) => apiStatus(err) === 404);
    await e.waitFor(() => gone('canary'), 'the garbage collector removes the pod-owned canary');
    await e.core.readNamespacedConfigMap({ name: 'state', namespace: e.ns }); // still there
    const replacement = await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=collector' }))
      .items.find((p) => p.metadata!.uid !== pod.metadata!.uid && p.status?.phase === 'Running'), 'the replacement pod Running');
    await readInside(replacement, (n) => n.join() === 'collector', 'the replacement names the DaemonSet');
    await e.apps.deleteNamespacedDaemonSet({ name: 'collector', namespace: e.ns, propagationPolicy: 'Background' });
    await e.waitFor(() => gone('state'), 'the garbage collector removes the ConfigMap with the DaemonSet');
  });

  it('node labels: paused, the container keeps its last owners; resumed, it catches up; env-file=false removes the file', async () => {
    await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: daemonSet('labelled') });
    const pod = await running('app=labelled');
    await readInside(pod, (n) => n.join() === 'labelled', 'names the DaemonSet');
    const label = (labels: Record<string, string | null>) => e.core.patchNode({ name: e.node.name, body: { metadata: { labels } } }, mergePatch);
    await label({ 'ownerrefs.dev/paused': 'true' });
    await e.waitFor(() => e.agent.lines.some((l) => l.msg === 'node settings changed' && (l.settings as { paused?: boolean }).paused === true), 'the agent applies paused=true');
    await e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app: 'off' } } } }, mergePatch);
    await e.waitFor(async () => ((await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns })).metadata?.ownerReferences ?? []).length === 0 || undefined, 'the controller orphans the pod');
    expect(items(await e.exec(pod, READ)).map((i) => i.name)).toEqual(['labelled']); // paused: as it was
    await label({ 'ownerrefs.dev/paused': null });
    await readInside(pod, (n) => n.length === 0, 'resumed: orphaned');
    expect(await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences.env'])).toMatch(/^OWNER_REFERENCES=/);
    const listed = async () => (await e.exec(pod, ['ls', '/etc/podinfo'])).split(/\s+/).filter(Boolean);
    await label({ 'ownerrefs.dev/env-file': 'false', 'ownerrefs.dev/dependents-file': 'false' });
    await e.waitFor(async () => (await listed()).join() === 'nodeOwnerReferences,ownerReferences' || undefined, 'only ownerReferences (and the Node file) left in the container\'s view');
    await label({ 'ownerrefs.dev/env-file': 'true' });
    await e.waitFor(async () => (await listed()).join() === 'nodeOwnerReferences,ownerReferences,ownerReferences.env' || undefined, 'the env file back, dependents still off');
    // An invalid value: a Warning Event on the Node, and the last good setting kept.
    await label({ 'ownerrefs.dev/env-file': 'maybe' });
    const ev = await e.waitFor(async () => (await e.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${e.node.name}` }))
      .items.find((x) => x.reason === 'OwnerRefsInvalidNodeLabel' && x.message?.includes('"maybe"')), 'a Warning Event on the Node');
    expect(ev).toMatchObject({ type: 'Warning', involvedObject: { kind: 'Node' } });
    expect(ev.message).toMatch(/use "true" or "false"; keeping ownerrefs.dev\/env-file=true/);
    expect(await listed()).toContain('ownerReferences.env');
    await label({ 'ownerrefs.dev/env-file': null, 'ownerrefs.dev/dependents-file': null });
  });

  /** Credentials of a ServiceAccount "app" that may create and get ConfigMaps, and nothing else. */
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
});
