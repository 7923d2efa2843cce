// The side doors to a pod's annotations (a Binding, pods/status), tried on a real node and
// judged by what a container reads, not only by the stored pod. The agent is stopped while
// they are tried: nothing of ours runs but the API server's policies, so no repair by the
// agent can hide a value that was let in. The container prints its downward API file ten
// times a second for its whole life; its log must never hold the forged value.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { mergePatch } from '../../localcluster/patch.ts';
import { ADMIN, kubeletIdentity, requestAs, serviceAccountIdentity, type Identity } from '../support/impersonate.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';

const OURS = 'ownerrefs.dev/owner-references';
const FORGED = '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"kind":"Deployment","name":"FORGED"}]}';
const WRITERS = /ValidatingAdmissionPolicy 'annotation-writers\.ownerrefs\.dev' with binding 'annotation-writers\.ownerrefs\.dev' denied request: .*ownerrefs\.dev\/owner-references/;

describe.runIf(CONTAINERS)('side doors, as a container on a real node sees them', () => {
  const e = useRealNode('sidedoor');
  const NAME = 'reader';
  let truth = '';

  const as = (who: Identity, method: string, urlPath: string, body: object, type?: string) => requestAs(e.kc, who, method, urlPath, body, type);
  const bind = (who: Identity, annotations: Record<string, string>) => as(who, 'POST', `/api/v1/namespaces/${e.ns}/pods/${NAME}/binding`,
    { apiVersion: 'v1', kind: 'Binding', metadata: { name: NAME, annotations }, target: { apiVersion: 'v1', kind: 'Node', name: e.node.name } });
  const statusPatch = (who: Identity, body: object) => as(who, 'PATCH', `/api/v1/namespaces/${e.ns}/pods/${NAME}/status`, body, 'application/merge-patch+json');
  /** Every line the container printed: its file, a bar, then the probe annotation's file. */
  const seen = async () => (await e.core.readNamespacedPodLog({ name: NAME, namespace: e.ns, container: 'app' })).split('\n').filter(Boolean);
  const lastSeen = (ok: (line: string) => boolean, what: string) => e.waitFor(async () => {
    const last = (await seen()).at(-1);
    return last !== undefined && ok(last) ? last : undefined;
  }, `the container reads ${what}`);
  /** Runs `attacks` with the agent stopped, and starts it again whatever happens. */
  const withoutAgent = async (attacks: () => Promise<void>) => {
    await e.agent.stop();
    try { await attacks(); } finally { await e.restartAgent(); }
  };

  const grant = async (sa: string, resource: string, verbs: string[]) => {
    const rbac = e.kc.makeApiClient(RbacAuthorizationV1Api);
    await e.core.createNamespacedServiceAccount({ namespace: e.ns, body: { metadata: { name: sa } } });
    await rbac.createNamespacedRole({ namespace: e.ns, body: { metadata: { name: sa }, rules: [{ apiGroups: [''], resources: [resource], verbs }] } });
    await rbac.createNamespacedRoleBinding({ namespace: e.ns, body: { metadata: { name: sa }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: sa },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: e.ns }] } });
    return serviceAccountIdentity(e.ns, sa);
  };

  it('a Binding carrying the value the pod reads is refused, as an admin and as a custom scheduler; the container starts and lives without ever reading it', async () => {
    const binder = await grant('binder', 'pods/binding', ['create']);
    const owner = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'owner' } } });
    truth = `{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"${owner.metadata!.uid}"}]}`;
    await e.core.createNamespacedPod({ namespace: e.ns, body: readerPod(owner.metadata!.uid!) });
    // The writers' policy is enforced about a second after the objects are applied: probe it on
    // a pod of no node (a probe let through plants nothing anyone reads).
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'probe' }, spec: { nodeName: 'nowhere', containers: [{ name: 'c', image: IMAGES.busybox }] } } });
    await e.waitFor(async () => (await as(ADMIN, 'PATCH', `/api/v1/namespaces/${e.ns}/pods/probe`,
      { metadata: { annotations: { 'ownerrefs.dev/workload-name': `probe-${Date.now()}` } } }, 'application/merge-patch+json')).code === 403 || undefined, 'the writers\' policy enforced');
    await withoutAgent(async () => {
      for (const who of [ADMIN, binder]) {
        const forged = await bind(who, { [OURS]: FORGED, team: 'a' });
        expect(forged.code, forged.message).toBe(403);
        expect(forged.message).toMatch(WRITERS);
      }
      expect(await bind(binder, { team: 'a' })).toEqual({ code: 200, message: '' });
      // Nothing of ours wrote the pod: the container starts and reads an empty file.
      await lastSeen((l) => l === '|', 'an empty file, before any agent ran');
    });
    expect(await lastSeen((l) => l === `${truth}|`, 'its owner, once the agent runs')).toBe(`${truth}|`);
    expect((await seen()).filter((l) => l.includes('FORGED'))).toEqual([]);
  });

  it('a status patch carrying another value is refused, as an admin, a status reporter and the pod\'s kubelet; the container keeps reading the truth', async () => {
    const reporter = await grant('status-reporter', 'pods/status', ['get', 'patch']);
    await lastSeen((l) => l === `${truth}|`, 'its owner');
    await withoutAgent(async () => {
      for (const who of [ADMIN, reporter, kubeletIdentity(e.node.name)]) {
        const forged = await statusPatch(who, { metadata: { annotations: { [OURS]: FORGED } } });
        expect(forged.code, forged.message).toBe(403);
        expect(forged.message).toMatch(WRITERS);
      }
      // A change made after the attacks that the container does see: once it shows, the
      // kubelet has rendered the pod as stored after every one of them.
      await e.core.patchNamespacedPod({ name: NAME, namespace: e.ns, body: { metadata: { annotations: { probe: 'after' } } } }, mergePatch);
      expect(await lastSeen((l) => l.endsWith('|after'), 'the probe written after the attacks')).toBe(`${truth}|after`);
    });
    expect((await seen()).filter((l) => l.includes('FORGED'))).toEqual([]);
  });
});

/** Owned by a ConfigMap, held unbound (its scheduler does not run) so that only the test binds it. */
function readerPod(ownerUid: string): V1Pod {
  const read = (key: string) => ({ fieldRef: { fieldPath: `metadata.annotations['${key}']` } });
  return {
    metadata: { name: 'reader', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: ownerUid }] },
    spec: {
      schedulerName: 'nobody', terminationGracePeriodSeconds: 0, automountServiceAccountToken: false,
      containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent',
        command: ['sh', '-c', 'while :; do echo "$(cat /etc/podinfo/ownerReferences)|$(cat /etc/podinfo/probe)"; sleep 0.1; done'],
        volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }] }],
      volumes: [{ name: 'podinfo', downwardAPI: { items: [{ path: 'ownerReferences', ...read(OURS) }, { path: 'probe', ...read('probe') }] } }],
    },
  };
}
