// The agent's one write privilege, `patch pods`, attacked with the agent's own credentials
// (a token of its ServiceAccount bound to a pod on its node, as the DaemonSet pod's is)
// against the real API server: its ValidatingAdmissionPolicy (agent/manifests/agentpolicy.ts,
// shipped in daemonset.yaml) lets it change only the ownerrefs.dev annotations it keeps,
// and only on pods of its own node. Everything else is refused, with the policy's message.

import path from 'node:path';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { agentKubeconfig, serviceAccountKubeconfig } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { apiStatus, waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { tmpDir } from '../support/tmpdir.ts';

const OURS = 'ownerrefs.dev/owner-references';
const POLICY = /ValidatingAdmissionPolicy 'ownerrefs-agent\.ownerrefs\.dev' with binding 'ownerrefs-agent\.ownerrefs\.dev' denied request: /;

/** The status code and message of a refused request, or 200 and '' when it went through. */
async function outcome(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
    return { code: 200, message: '' };
  } catch (err) {
    const body = (err as { body?: unknown }).body;
    return { code: apiStatus(err) ?? 0, message: (JSON.parse(String(body)) as { message: string }).message };
  }
}

describe("the agent's credentials against its ValidatingAdmissionPolicy", () => {
  const e = useE2E('secpol');
  const OTHER_NODE = 'secpol-other-node';
  let agent: CoreV1Api;
  let mine: V1Pod;
  let theirs: V1Pod;

  const podOn = (name: string, nodeName: string) => e.core.createNamespacedPod({ namespace: e.ns, body: {
    metadata: { name, labels: { app: 'x' }, annotations: { keep: 'me' }, finalizers: [] },
    spec: { nodeName, containers: [{ name: 'c', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${OURS}']` } } }] }] },
  } });
  const patch = (api: CoreV1Api, pod: V1Pod, body: object) => outcome(api.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body }, mergePatch));
  const annotate = (value: string, extra: object = {}) => ({ metadata: { annotations: { [OURS]: value }, ...extra } });

  beforeAll(async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(path.join(e.kubeletRoot, 'agent.kubeconfig')); // the credentials the running agent uses
    agent = kc.makeApiClient(CoreV1Api);
    await e.core.createNode({ body: { metadata: { name: OTHER_NODE } } }).catch(() => undefined);
    mine = await podOn('mine', e.nodeName);
    theirs = await podOn('theirs', OTHER_NODE);
    // A policy is enforced about a second after it is created: wait until a label change is refused.
    const probe = await podOn('probe', e.nodeName);
    await waitFor(async () => (await patch(agent, probe, { metadata: { labels: { probe: String(Date.now()) } } })).code === 403 || undefined, { describe: 'the policy enforced' });
  });

  it('sets an ownerrefs.dev annotation it keeps, on a pod of its own node', async () => {
    expect(await patch(agent, mine, annotate('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}'))).toEqual({ code: 200, message: '' });
  });

  it.each([
    { what: 'a label', body: { metadata: { labels: { app: 'stolen' } } }, says: "may not change a pod's labels" },
    { what: 'another annotation', body: { metadata: { annotations: { keep: 'changed' } } }, says: 'may change no annotation but ownerrefs.dev/owner-references' },
    { what: 'an ownerrefs.dev annotation it does not keep', body: { metadata: { annotations: { 'ownerrefs.dev/volume': 'x' } } }, says: 'may change no annotation but' },
    { what: 'a finalizer', body: { metadata: { finalizers: ['example.com/hold'] } }, says: "may not change a pod's finalizers" },
    { what: 'the spec', body: { spec: { activeDeadlineSeconds: 5 } }, says: "may not change a pod's spec" },
    { what: 'its annotation and a label in one patch', body: annotate('x', { labels: { app: 'stolen' } }), says: "may not change a pod's labels" },
  ])('is refused $what, with the policy\'s message', async ({ body, says }) => {
    const r = await patch(agent, mine, body);
    expect(r.code).toBe(403);
    expect(r.message).toMatch(POLICY);
    expect(r.message).toContain(says);
  });

  it('is refused ownerReferences (adopting the pod): by OwnerReferencesPermissionEnforcement first, where it is on, and by the policy', async () => {
    const r = await patch(agent, mine, { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: '00000000-0000-0000-0000-000000000001' }] } });
    expect(r.code).toBe(403);
    // This control plane enables OwnerReferencesPermissionEnforcement (many do not): it refuses
    // an owner set by a user who may not delete the object, before any policy runs.
    expect(r.message).toMatch(/cannot set an ownerRef on a resource you can't delete|may not change a pod's ownerReferences/);
  });

  it("is refused its annotation on another node's pod", async () => {
    const r = await patch(agent, theirs, annotate('x'));
    expect(r).toMatchObject({ code: 403, message: expect.stringContaining('may change only pods bound to the node named in its own service account token') });
  });

  it('is refused by RBAC a whole-object update, a status patch, a create and a delete', async () => {
    const current = await e.core.readNamespacedPod({ name: 'mine', namespace: e.ns });
    current.metadata!.annotations = { ...current.metadata!.annotations, [OURS]: 'via update' };
    const refused = [
      await outcome(agent.replaceNamespacedPod({ name: 'mine', namespace: e.ns, body: current })),
      await outcome(agent.patchNamespacedPodStatus({ name: 'mine', namespace: e.ns, body: { status: { phase: 'Failed' } } }, mergePatch)),
      await outcome(agent.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'planted' }, spec: { containers: [{ name: 'c', image: 'x' }] } } })),
      await outcome(agent.deleteNamespacedPod({ name: 'mine', namespace: e.ns })),
    ];
    expect(refused.map((r) => r.code)).toEqual([403, 403, 403, 403]);
    for (const r of refused) expect(r.message).toMatch(/is forbidden: User "system:serviceaccount:ownerrefs-system:ownerrefs-agent" cannot/);
  });

  it('is refused everything with a token of its ServiceAccount that is bound to no pod (it names no node)', async () => {
    const file = await serviceAccountKubeconfig(e.kc, { namespace: 'ownerrefs-system', name: 'ownerrefs-agent' }, path.join(tmpDir(), 'unbound.kubeconfig'));
    const kc = new KubeConfig();
    kc.loadFromFile(file);
    const r = await patch(kc.makeApiClient(CoreV1Api), mine, annotate('x'));
    expect(r).toMatchObject({ code: 403, message: expect.stringContaining('may change only pods bound to the node named in its own service account token') });
  });

  it("is refused another node's pods with a token bound to that node's agent pod, and allowed them", async () => {
    const file = await agentKubeconfig(e.kc, tmpDir(), { nodeName: OTHER_NODE });
    const kc = new KubeConfig();
    kc.loadFromFile(file);
    const other = kc.makeApiClient(CoreV1Api);
    expect((await patch(other, mine, annotate('x'))).code).toBe(403);
    expect((await patch(other, theirs, annotate('x'))).code).toBe(200);
  });
});
