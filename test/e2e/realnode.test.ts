// On a real node: the kubelet with containerd and runc, containers reading the files
// (through exec and logs via the API server), the agent as a host process on the node's
// kubelet root, in emptyDir mode and as the kubelet's CSI driver at once.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { V1DaemonSet, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { mergePatch } from '../../localcluster/patch.ts';
import { items } from '../support/e2e.ts';
import { IMAGES, REAL_NODE_MISSING, useRealNode } from '../support/realnode-e2e.ts';

const READ = ['cat', '/etc/podinfo/ownerReferences'];
const container = (command: string[]) => ({
  name: 'app', image: IMAGES.busybox, imagePullPolicy: 'Never', command,
  volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }],
});

function daemonSet(name: string): V1DaemonSet {
  return { metadata: { name }, spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name }, annotations: { 'ownerrefs.dev/volume': 'podinfo' } }, spec: {
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

describe.skipIf(REAL_NODE_MISSING !== '')('on a real node (kubelet, containerd, runc)', () => {
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

  it("a DaemonSet pod's container reads its owners, orphaned and adopted again", async () => {
    await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: daemonSet('podinfo') });
    const pod = await running('app=podinfo');
    await readInside(pod, (n) => n.join() === 'podinfo', 'names the DaemonSet');
    // As in daemonset.test.ts: a new second, so the controller keeps this pod on re-adoption.
    const created = new Date(pod.metadata!.creationTimestamp!).getTime();
    await e.waitFor(() => Date.now() >= created + 1_100, 'a new second');
    const relabel = (app: string) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app } } } }, mergePatch);
    await relabel('elsewhere');
    await readInside(pod, (n) => n.length === 0, 'orphaned: no owner');
    await relabel('podinfo');
    await readInside(pod, (n) => n.join() === 'podinfo', 'adopted again');
  });

  it('a CSI volume has the files at the container\'s first instruction, read-only, and is unpublished with the pod', async () => {
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: csiDeployment('csi') });
    const pod = await running('app=csi');
    const rs = pod.metadata!.ownerReferences![0]!;
    const first = await e.waitFor(async () => (await e.core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: e.ns })) || undefined, 'the container\'s first output');
    expect(items(first.trim())).toEqual([expect.objectContaining({ kind: 'ReplicaSet', name: rs.name, uid: rs.uid })]);
    await expect(e.exec(pod, ['touch', '/etc/podinfo/x'])).rejects.toThrow(/Read-only file system/);
    expect(e.agent.lines.some((l) => l.msg === 'registered with the kubelet')).toBe(true);

    const target = path.join(e.node.kubeletRoot, 'pods', pod.metadata!.uid!, 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount');
    expect(existsSync(path.join(target, 'ownerReferences'))).toBe(true);
    await e.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns });
    await e.waitFor(() => !existsSync(target), 'the kubelet unpublishes the volume and the agent removes its files');
    expect(e.agent.lines.some((l) => l.msg === 'csi volume unpublished' && l.podUID === pod.metadata!.uid)).toBe(true);
  });

  it('keeps serving while the kubelet restarts and reconstructs its volumes', async () => {
    const pod = await running('app=podinfo');
    await e.node.restartKubelet();
    const relabel = (app: string) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app } } } }, mergePatch);
    await relabel('after-restart');
    await readInside(pod, (n) => n.length === 0, 'orphaned after the kubelet restart');
    const csi = await running('app=csi'); // the Deployment's replacement, published by the restarted kubelet
    await e.waitFor(async () => (await e.core.readNamespacedPodLog({ name: csi.metadata!.name!, namespace: e.ns })).includes('"kind":"ReplicaSet"') || undefined,
      'the replacement CSI pod read its owner at start');
  });
});
