// The fault-injection hooks (apiserver restart/kill/start, etcd compaction)
// on a private control plane, and the kubelet emulator's recovery from them.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatorNode, startLocalControlPlane, type EmulatorNode, type LocalControlPlane } from '../../localcluster/clusters.ts';
import type { ControlPlane } from '../../localcluster/controlplane/controlplane.ts';
import { httpCall } from '../../localcluster/controlplane/net.ts';
import { apiStatus, clusterInfo, newNamespace, waitFor } from '../support/cluster.ts';
import { MIRROR_ANNOTATION, type KubeletEmulator } from '../../localcluster/kubelet/emulator.ts';

const NODE = 'lifecycle-node';

function barePod(name: string): V1Pod {
  // Bound directly: exercises the emulator without needing the scheduler.
  return {
    metadata: { name },
    spec: {
      nodeName: NODE,
      containers: [{ name: 'main', image: 'busybox' }],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
  };
}

describe('private control plane lifecycle', () => {
  let lcp: LocalControlPlane | undefined;
  let node: EmulatorNode | undefined;
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: KubeletEmulator;
  let kubeletRoot: string;
  let namespace: string;

  const wait = <T>(fn: () => T | Promise<T>, describe: string) =>
    waitFor(fn, { describe, logsDir: cp.logsDir });

  beforeAll(async () => {
    lcp = await startLocalControlPlane({ binDir: clusterInfo().binDir, nodeName: NODE });
    ({ cp, core } = lcp);
    node = await startEmulatorNode({ kc: lcp.kc, name: NODE });
    ({ kubelet, kubeletRoot } = node);
    namespace = (await newNamespace('lifecycle', lcp.kc)).name;
  });

  afterAll(async () => {
    await node?.stop();
    await lcp?.stop();
  });

  it('restarts the apiserver on the same port with the same data', async () => {
    const first = await core.createNamespacedPod({ namespace, body: barePod('before-restart') });
    await kubelet.waitForVolumeDir(first.metadata!.uid!, 'data');
    const pid = cp.pids.apiserver;
    const server = cp.server;

    await cp.restartApiserver();
    expect(cp.pids.apiserver).toBeDefined();
    expect(cp.pids.apiserver).not.toBe(pid);
    expect(cp.server).toBe(server);
    const again = await core.readNamespacedPod({ name: 'before-restart', namespace });
    expect(again.metadata?.uid).toBe(first.metadata?.uid);

    // The emulator's watch broke with the restart; a new pod proves it resumed.
    const second = await core.createNamespacedPod({ namespace, body: barePod('after-restart') });
    await kubelet.waitForVolumeDir(second.metadata!.uid!, 'data');
    await wait(async () => (await core.readNamespacedPod({ name: 'after-restart', namespace })).status?.phase === 'Running',
      'after-restart pod reported Running by the emulator');
  });

  it('kills and starts the apiserver; deletions made meanwhile reach the emulator', async () => {
    const pod = await core.readNamespacedPod({ name: 'before-restart', namespace });
    const uid = pod.metadata!.uid!;
    await cp.killApiserver();
    expect(cp.pids.apiserver).toBeUndefined();
    const down = await core.readNamespacedPod({ name: 'before-restart', namespace }).then(() => undefined, (e: unknown) => e);
    expect(down).toBeInstanceOf(Error);

    await cp.startApiserver();
    await core.deleteNamespacedPod({ name: 'before-restart', namespace });
    // Graceful deletion only completes because the emulator confirms it.
    await wait(async () => {
      try {
        await core.readNamespacedPod({ name: 'before-restart', namespace });
        return false;
      } catch (err) {
        return apiStatus(err) === 404;
      }
    }, 'before-restart pod deleted after graceful confirmation');
    expect(existsSync(kubelet.podDir(uid))).toBe(false);
  });

  it('lays out a mirror pod under the uid from its config.mirror annotation', async () => {
    const body = barePod('mirror');
    body.metadata!.annotations = { [MIRROR_ANNOTATION]: 'static-pod-hash-0001' };
    const pod = await core.createNamespacedPod({ namespace, body });
    const dir = await kubelet.waitForVolumeDir(pod.metadata!.uid!, 'data');
    expect(dir).toBe(join(kubeletRoot, 'pods', 'static-pod-hash-0001', 'volumes', 'kubernetes.io~empty-dir', 'data'));
  });

  it('compacts etcd so old revisions are gone', async () => {
    const etcdUrl = cp.etcdUrl;
    const rev = await etcdRevision(etcdUrl);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'bump' } } });
    await cp.compact();
    const key = Buffer.from('/registry/configmaps/').toString('base64');
    const r = await httpCall(`${etcdUrl}/v3/kv/range`,
      { method: 'POST', body: JSON.stringify({ key, revision: String(rev) }) });
    expect(r.body).toContain('compacted');
  });
});

async function etcdRevision(etcdUrl: string): Promise<number> {
  const r = await httpCall(`${etcdUrl}/v3/maintenance/status`, { method: 'POST', body: '{}' });
  return Number((JSON.parse(r.body) as { header: { revision: string } }).header.revision);
}
