// CSI mode against the real control plane. The test plays the kubelet with kubeletcsi
// (Go, the CSI spec's and the kubelet's generated code): it registers the driver over
// the plugin-registration socket, and publishes the inline volume of a real DaemonSet
// pod. The files must be right when NodePublishVolume returns (the kubelet starts the
// containers then), and must follow the real DaemonSet controller's orphaning and
// adoption like emptyDir volumes do.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1DaemonSet, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRIVER, kubeletPrepare } from '../support/csi.ts';
import { csiToolsDir, kubeletPublish, kubeletRegister, kubeletUnpublish } from '../support/csitools.ts';
import { items, useE2E } from '../support/e2e.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { waitFor } from '../../localcluster/wait.ts';

const EMPTY = '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}';
const sockets = mkdtempSync(path.join(os.tmpdir(), 'csi-e2e-'));
const SOCKET = path.join(sockets, 'plugins', DRIVER, 'csi.sock');
const REGISTRATION = path.join(sockets, 'plugins_registry');

function csiDaemonSet(name: string): V1DaemonSet {
  const labels = { app: name };
  return {
    metadata: { name },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          tolerations: [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 0,
          containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }] }],
          volumes: [{ name: 'podinfo', csi: { driver: DRIVER, readOnly: true } }],
        },
      },
    },
  };
}

describe('CSI mode', () => {
  const e = useE2E('csi', { agentArgs: [`--csi-socket=${SOCKET}`, `--registration-dir=${REGISTRATION}`] });
  beforeAll(() => csiToolsDir(), 300_000);
  afterAll(() => rmSync(sockets, { recursive: true, force: true }));

  it('registers with the kubelet over the plugin-registration socket', async () => {
    const r = await kubeletRegister(path.join(REGISTRATION, `${DRIVER}-reg.sock`));
    expect(r).toEqual({
      code: 'OK', message: '', type: 'CSIPlugin', name: DRIVER, endpoint: SOCKET, supportedVersions: ['1.0.0'],
      nodeId: e.nodeName, problem: '',
    });
    await waitFor(() => e.agent.lines.some((l) => l.msg === 'registered with the kubelet'), { describe: 'the agent hears it was registered' });
  });

  it('has the files in place when NodePublishVolume returns, and they follow orphaning and adoption', async () => {
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: csiDaemonSet('podinfo-csi') });
    // Bound: a kubelet publishes only for pods bound to its node (the DaemonSet's pod is
    // scheduled after it is created; before that the driver rightly refuses it).
    const pod: V1Pod = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=podinfo-csi' })).items.find((p) => p.spec?.nodeName === e.nodeName),
      { describe: 'the DaemonSet pod, bound to the node' });
    const ref = { name: pod.metadata!.name!, namespace: e.ns, uid: pod.metadata!.uid!, serviceAccount: pod.spec!.serviceAccountName! };
    const req = kubeletPrepare(e.kubeletRoot, ref, 'podinfo', e.nodeName);
    const file = (name = 'ownerReferences') => readFileSync(path.join(req.targetPath, name), 'utf8');

    // A kubelet would refuse nothing here, but the driver insists on a read-only volume.
    const rw = await kubeletPublish(SOCKET, { ...req, readonly: false }, ref);
    expect(rw).toMatchObject({ code: 'InvalidArgument', message: expect.stringMatching(/readOnly: true/) });
    expect(existsSync(req.targetPath)).toBe(false);

    expect(await kubeletPublish(SOCKET, req, ref)).toEqual({ code: 'OK', message: '' });
    // No waiting: this is the moment the kubelet starts the containers.
    expect(file()).toBe('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"apiVersion":"apps/v1","kind":"DaemonSet",' +
      `"name":"podinfo-csi","uid":"${ds.metadata!.uid}","controller":true,"blockOwnerDeletion":true}]}`);
    expect(file('dependentOwnerReferences')).toBe(`[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"podinfo-csi","uid":"${ds.metadata!.uid}"}]`);
    expect(file('ownerReferences.env')).toBe(`OWNER_REFERENCES='${file()}'\n`);

    // The DaemonSet controller keeps the older of two pods by creation time at one-second
    // resolution: let a second pass so the replacement pod it makes is younger.
    const created = new Date(pod.metadata!.creationTimestamp!).getTime();
    await waitFor(() => Date.now() >= created + 1_100, { describe: 'a new second on the API server clock' });
    const relabel = (app: string) => e.core.patchNamespacedPod({ name: ref.name, namespace: e.ns, body: { metadata: { labels: { app } } } }, mergePatch);
    const until = (ok: (t: string) => boolean, what: string) =>
      waitFor(() => existsSync(req.targetPath) && ok(file()), { describe: what });

    await relabel('elsewhere');
    await until((t) => t === EMPTY, 'items:[] after orphaning');
    expect(file('dependentOwnerReferences')).toBe('[]');
    await relabel('podinfo-csi');
    await until((t) => items(t).some((i) => i.kind === 'DaemonSet' && i.uid === ds.metadata!.uid), 'the DaemonSet again after adoption');

    expect(await kubeletUnpublish(SOCKET, req)).toEqual({ code: 'OK', message: '' });
    expect(readdirSync(path.dirname(req.targetPath))).toEqual(['vol_data.json']);
    expect(await e.agent.metric('ownerrefs_csi_requests_total', 'method="NodePublishVolume",code="OK"')).toBe(1);
  });

  it('keeps a volume published before an agent restart current after it', async () => {
    const cm = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'owner' } } });
    const owner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: cm.metadata!.uid! };
    const pod = await e.core.createNamespacedPod({ namespace: e.ns, body: {
      metadata: { name: 'restart', ownerReferences: [owner] },
      spec: { ...csiDaemonSet('x').spec!.template.spec!, nodeName: e.nodeName },
    } });
    const ref = { name: 'restart', namespace: e.ns, uid: pod.metadata!.uid! };
    const req = kubeletPrepare(e.kubeletRoot, ref, 'podinfo', e.nodeName);
    const file = () => readFileSync(path.join(req.targetPath, 'ownerReferences'), 'utf8');
    expect(await kubeletPublish(SOCKET, req, ref)).toEqual({ code: 'OK', message: '' });
    expect(items(file())).toEqual([expect.objectContaining({ kind: 'ConfigMap', uid: owner.uid })]);

    expect(await e.agent.stop()).toBe(0);
    await e.core.patchNamespacedPod({ name: 'restart', namespace: e.ns, body: { metadata: { ownerReferences: null } } }, mergePatch);
    await e.restartAgent();
    await waitFor(() => file() === EMPTY, { describe: 'the restarted agent updates the volume it did not publish' });
    expect(await kubeletUnpublish(SOCKET, req)).toEqual({ code: 'OK', message: '' });
    expect(existsSync(req.targetPath)).toBe(false);
  });
});
