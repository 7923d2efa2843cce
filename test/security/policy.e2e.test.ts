// The agent's one write privilege, `patch pods`, attacked with the agent's own credentials
// (a token of its ServiceAccount bound to a pod on its node, as the DaemonSet pod's is)
// against the real API server: its ValidatingAdmissionPolicy (agent/manifests/agentpolicy.ts,
// shipped in daemonset.yaml) lets it change only the ownerrefs.dev annotations it keeps,
// and only on pods of its own node. Everything else is refused, with the policy's message.

import path from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { agentKubeconfig, apply, manifestObjects, serviceAccountKubeconfig } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { apiServerMetrics, clusterInfo, outcome, seriesSum, waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { ADMIN, kubeletIdentity, requestAs, serviceAccountIdentity, type Identity } from '../support/impersonate.ts';
import { tmpDir } from '../support/tmpdir.ts';

const OURS = 'ownerrefs.dev/owner-references';
const POLICY = /ValidatingAdmissionPolicy 'ownerrefs-agent\.ownerrefs\.dev' with binding 'ownerrefs-agent\.ownerrefs\.dev' denied request: /;

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

  it('its writes wait in a priority level of their own (API Priority and Fairness, daemonset.yaml); its reads stay in the built-in one', async () => {
    const level = 'priority_level="ownerrefs-agent-writes"';
    const metrics = () => apiServerMetrics(clusterInfo().kubeconfigPath);
    const dispatched = async (...labels: string[]) => seriesSum(await metrics(), 'apiserver_flowcontrol_dispatched_requests_total', ...labels);
    const [writes0, reads0] = [await dispatched(level), await dispatched('flow_schema="service-accounts"', 'priority_level="workload-low"')];
    for (let i = 0; i < 3; i++) expect((await patch(agent, mine, annotate(`{"kind":"OwnerReference","apiVersion":"meta/v1","items":[],"n":${i}}`))).code).toBe(200);
    for (let i = 0; i < 3; i++) await agent.readNamespacedPod({ name: 'mine', namespace: e.ns });
    // The agent running beside this test writes too (Events, its own annotations): at least ours.
    expect((await dispatched(level)) - writes0).toBeGreaterThanOrEqual(3);
    expect((await dispatched('flow_schema="service-accounts"', 'priority_level="workload-low"')) - reads0).toBeGreaterThanOrEqual(3);
    // Only writes: reads never land in the agents' level (a write of the agent's running beside may).
    const before = await dispatched(level);
    for (let i = 0; i < 10; i++) await agent.listNamespacedPod({ namespace: e.ns, fieldSelector: `spec.nodeName=${e.nodeName}` });
    const text = await metrics();
    expect(seriesSum(text, 'apiserver_flowcontrol_nominal_limit_seats', level)).toBeGreaterThan(0);
    expect(seriesSum(text, 'apiserver_flowcontrol_dispatched_requests_total', level) - before).toBeLessThanOrEqual(2);
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

// Only the webhook (at creation) and the agent write a pod's ownerrefs.dev/ annotations: every
// other writer, an admin included, is refused by the annotation-writers policy
// (agent/manifests/writerspolicy.ts, shipped in daemonset.yaml); its other changes go through.
describe('every other writer against the annotation-writers policy', () => {
  const e = useE2E('writers');
  const WRITERS = /ValidatingAdmissionPolicy 'annotation-writers\.ownerrefs\.dev' with binding 'annotation-writers\.ownerrefs\.dev' denied request: the ownerrefs\.dev\/ annotations of a pod are written only by the ownerrefs\.dev webhook, at creation, and by the ownerrefs agent \(system:serviceaccount:ownerrefs-system:ownerrefs-agent\); this request changes /;
  let editor: CoreV1Api;
  const patch = (api: CoreV1Api, body: object) => outcome(api.patchNamespacedPod({ name: 'target', namespace: e.ns, body }, mergePatch));
  const patchPod = (api: CoreV1Api, name: string, body: object) => api.patchNamespacedPod({ name, namespace: e.ns, body }, mergePatch);
  const ssa = (annotations: Record<string, string>) => outcome(KubernetesObjectApi.makeApiClient(e.kc).patch(
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'target', namespace: e.ns, annotations } }, undefined, undefined, 'writers-e2e', true, PatchStrategy.ServerSideApply));

  beforeAll(async () => {
    // A user who may patch pods in this namespace, as a team's deployer would.
    await e.core.createNamespacedServiceAccount({ namespace: e.ns, body: { metadata: { name: 'editor' } } });
    const rbac = e.kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({ namespace: e.ns, body: { metadata: { name: 'editor' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'create', 'patch', 'update'] }] } });
    await rbac.createNamespacedRoleBinding({ namespace: e.ns, body: { metadata: { name: 'editor' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'editor' },
      subjects: [{ kind: 'ServiceAccount', name: 'editor', namespace: e.ns }] } });
    // Narrow grants, as a status reporter or a custom scheduler gets them.
    for (const [sa, rules] of [['status-reporter', [{ apiGroups: [''], resources: ['pods/status'], verbs: ['get', 'patch'] }]], ['binder', [{ apiGroups: [''], resources: ['pods/binding'], verbs: ['create'] }]]] as const) {
      await e.core.createNamespacedServiceAccount({ namespace: e.ns, body: { metadata: { name: sa } } });
      await rbac.createNamespacedRole({ namespace: e.ns, body: { metadata: { name: sa }, rules: rules as never } });
      await rbac.createNamespacedRoleBinding({ namespace: e.ns, body: { metadata: { name: sa }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: sa },
        subjects: [{ kind: 'ServiceAccount', name: sa, namespace: e.ns }] } });
    }
    const kc = new KubeConfig();
    kc.loadFromFile(await serviceAccountKubeconfig(e.kc, { namespace: e.ns, name: 'editor' }, path.join(tmpDir(), 'editor.kubeconfig')));
    editor = kc.makeApiClient(CoreV1Api);
    await e.core.createNamespacedPod({ namespace: e.ns, body: {
      metadata: { name: 'target', labels: { app: 'x' } },
      spec: { nodeName: e.nodeName, containers: [{ name: 'c', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${OURS}']` } } }] }] },
    } });
    // The agent sets the annotation the pod reads (its own write goes through); the policy is
    // enforced about a second after it is created: wait until a forged value is refused.
    await waitFor(async () => (await e.core.readNamespacedPod({ name: 'target', namespace: e.ns })).metadata?.annotations?.[OURS], { describe: 'the agent\'s annotation' });
    await waitFor(async () => (await patch(editor, { metadata: { annotations: { 'ownerrefs.dev/workload-name': `probe-${Date.now()}` } } })).code === 403 || undefined, { describe: 'the policy enforced' });
  });

  it.each([
    { who: 'a user with patch pods', as: () => editor, body: { metadata: { annotations: { 'ownerrefs.dev/workload-name': 'payments' } } }, names: 'ownerrefs.dev/workload-name' },
    { who: 'a user with patch pods, removing a key', as: () => editor, body: { metadata: { annotations: { [OURS]: null } } }, names: OURS },
    { who: 'a cluster admin', as: () => e.core, body: { metadata: { annotations: { [OURS]: 'forged', 'ownerrefs.dev/otel-resource-attributes': 'k8s.deployment.name=payments' } } },
      names: `${OURS}, ownerrefs.dev/otel-resource-attributes` },
  ])('refuses $who, naming the keys', async ({ as, body, names }) => {
    const r = await patch(as(), body);
    expect(r.code).toBe(403);
    expect(r.message).toMatch(WRITERS);
    expect(r.message.endsWith(names)).toBe(true);
  });

  const request = (as: Identity, method: string, urlPath: string, body: object, contentType?: string) => requestAs(e.kc, as, method, urlPath, body, contentType);
  const serviceAccount = (name: string) => serviceAccountIdentity(e.ns, name);
  const kubelet = () => kubeletIdentity(e.nodeName);
  const statusPatch = (as: Identity, patchBody: object) => request(as, 'PATCH', `/api/v1/namespaces/${e.ns}/pods/target/status`, patchBody, 'application/merge-patch+json');

  it.each([
    { who: 'a cluster admin', as: () => ADMIN },
    { who: 'a ServiceAccount granted only patch pods/status', as: () => serviceAccount('status-reporter') },
    { who: 'the kubelet of the pod\'s node', as: kubelet },
  ])('refuses $who writing one through pods/status, and lets its status change through', async ({ as }) => {
    const forged = await statusPatch(as(), { metadata: { annotations: { 'ownerrefs.dev/workload-name': 'payments' } } });
    expect(forged.code, forged.message).toBe(403);
    expect(forged.message).toMatch(WRITERS);
    expect((await e.core.readNamespacedPod({ name: 'target', namespace: e.ns })).metadata?.annotations?.['ownerrefs.dev/workload-name']).toBeUndefined();
    expect(await statusPatch(as(), { status: { message: `reported ${Date.now()}` } })).toEqual({ code: 200, message: '' });
  });

  it.each([
    { who: 'a cluster admin', as: () => ADMIN, via: 'pods/binding' },
    { who: 'a ServiceAccount granted only create pods/binding', as: () => serviceAccount('binder'), via: 'pods/binding' },
    { who: 'a cluster admin', as: () => ADMIN, via: 'bindings' },
  ])('refuses $who a Binding that carries one ($via): the pod stays unbound, without it; a Binding without one binds', async ({ who, as, via }) => {
    const name = `unbound-${via.replace('/', '-')}-${who.length}`;
    // Held by a scheduler that does not run, so only the test binds it.
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name }, spec: { schedulerName: 'nobody', containers: [{ name: 'c', image: 'busybox' }] } } });
    const bind = (annotations: Record<string, string>) => request(as(), 'POST', via === 'bindings' ? `/api/v1/namespaces/${e.ns}/bindings` : `/api/v1/namespaces/${e.ns}/pods/${name}/binding`,
      { apiVersion: 'v1', kind: 'Binding', metadata: { name, annotations }, target: { apiVersion: 'v1', kind: 'Node', name: e.nodeName } });
    const forged = await bind({ [OURS]: '[{"kind":"Forged"}]', team: 'a' });
    expect(forged.code, forged.message).toBe(403);
    expect(forged.message).toMatch(WRITERS);
    const still = await e.core.readNamespacedPod({ name, namespace: e.ns });
    expect({ node: still.spec!.nodeName, ours: still.metadata!.annotations?.[OURS] }).toEqual({ node: undefined, ours: undefined });
    expect(await bind({ team: 'a' })).toEqual({ code: 200, message: '' });
    const bound = await e.core.readNamespacedPod({ name, namespace: e.ns });
    expect({ node: bound.spec!.nodeName, team: bound.metadata!.annotations?.team }).toEqual({ node: e.nodeName, team: 'a' });
  });

  const CREATED = (key: string) => new RegExp(`ValidatingAdmissionPolicy 'annotation-writers\\.ownerrefs\\.dev' with binding 'annotation-writers\\.ownerrefs\\.dev' denied request: a pod is created (carrying the annotation ${key.replace(/[./]/g, '\\$&')} without reading it|without the annotation ${key.replace(/[./]/g, '\\$&')})`);
  const reading = (key: string) => [{ name: 'c', image: 'busybox', env: [{ name: 'V', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${key}']` } } }] }];
  let created = 0;
  const create = (as: () => CoreV1Api, annotations: Record<string, string>, containers: object[] = [{ name: 'c', image: 'busybox' }]) =>
    outcome(as().createNamespacedPod({ namespace: e.ns, body: { metadata: { name: `created-${created++}`, annotations }, spec: { nodeName: e.nodeName, containers } as never } }));

  // No webhook runs here: these are the pods an install without it, or a namespace its
  // selector leaves out, would admit with the author's values.
  it.each<{ who: string; as: () => CoreV1Api; annotations: Record<string, string>; containers?: object[]; names: string }>([
    { who: 'a cluster admin', as: () => e.core, annotations: { 'ownerrefs.dev/workload-name': 'payments', team: 'a' }, names: 'ownerrefs.dev/workload-name' },
    { who: 'a user with create pods', as: () => editor, annotations: { 'ownerrefs.dev/otel-resource-attributes': 'k8s.deployment.name=payments' }, names: 'ownerrefs.dev/otel-resource-attributes' },
    { who: 'a user with create pods, reading another of ours', as: () => editor, annotations: { [OURS]: '[]', 'ownerrefs.dev/controller-uid': 'forged' }, containers: reading(OURS), names: 'ownerrefs.dev/controller-uid' },
    { who: 'a user with create pods, reading the Node\'s', as: () => editor, annotations: { 'ownerrefs.dev/node-owner-references': '[]' }, containers: reading('ownerrefs.dev/node-owner-references'), names: 'ownerrefs.dev/node-owner-references' },
  ])('refuses $who a pod created carrying one it does not read, or the Node\'s, naming it', async ({ as, annotations, containers, names }) => {
    const r = await create(as, annotations, containers);
    expect(r.code, r.message).toBe(403);
    expect(r.message).toMatch(CREATED(names));
  });

  it('refuses the kubelet of the pod\'s node a mirror pod created carrying one it does not read, naming it', async () => {
    const node = await e.core.readNode({ name: e.nodeName });
    const r = await request(kubelet(), 'POST', `/api/v1/namespaces/${e.ns}/pods`, { apiVersion: 'v1', kind: 'Pod',
      metadata: { name: `created-${created++}`, annotations: { 'kubernetes.io/config.mirror': 'forged', 'ownerrefs.dev/workload-name': 'payments' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: e.nodeName, uid: node.metadata!.uid!, controller: true }] },
      spec: { nodeName: e.nodeName, containers: [{ name: 'c', image: 'busybox' }] } });
    expect(r.code, r.message).toBe(403);
    expect(r.message).toMatch(CREATED('ownerrefs.dev/workload-name'));
  });

  it('admits a pod created carrying a value it reads, and the agent writes the truth over it once the pod is on its node', async () => {
    const name = `created-${created}`;
    expect(await create(() => editor, { [OURS]: '[{"kind":"Forged"}]', team: 'a' }, reading(OURS))).toEqual({ code: 200, message: '' });
    const fixed = await waitFor(async () => {
      const a = (await e.core.readNamespacedPod({ name, namespace: e.ns })).metadata!.annotations ?? {};
      return a[OURS] === '[{"kind":"Forged"}]' ? undefined : a;
    }, { describe: 'the forged value replaced', intervalMs: 5 });
    // The truth for a pod without owners: what the agent wrote on `target`, which has none either.
    const truth = (await e.core.readNamespacedPod({ name: 'target', namespace: e.ns })).metadata!.annotations![OURS];
    expect(fixed).toEqual({ [OURS]: truth, team: 'a' });
  });

  it('where admission cannot refuse (the binding deleted, break-glass): the agent removes the values a pod created carrying does not read, and keeps the author\'s own', async () => {
    const reg = e.kc.makeApiClient(AdmissionregistrationV1Api);
    const lies = { 'ownerrefs.dev/workload-name': 'payments', 'ownerrefs.dev/otel-resource-attributes': 'k8s.deployment.name=payments' };
    const lifetimes: number[] = [];
    await reg.deleteValidatingAdmissionPolicyBinding({ name: 'annotation-writers.ownerrefs.dev' });
    try {
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        // The API server applies a deleted binding for about a second more: try until admitted.
        await waitFor(async () => (await outcome(e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: `forged-${i}`, annotations: { ...lies, 'ownerrefs.dev/team': 'mine' } },
          spec: { nodeName: e.nodeName, containers: [{ name: 'c', image: 'busybox' }] } } }))).code === 200 || undefined, { describe: `forged-${i} admitted without the binding` });
        const clean = await waitFor(async () => {
          const a = (await e.core.readNamespacedPod({ name: `forged-${i}`, namespace: e.ns })).metadata!.annotations ?? {};
          return Object.keys(lies).some((k) => k in a) ? undefined : a;
        }, { describe: `forged-${i}'s lies removed`, intervalMs: 5 });
        if (i > 0) lifetimes.push(performance.now() - started);
        expect(clean).toEqual({ 'ownerrefs.dev/team': 'mine' });
      }
    } finally {
      await apply(e.kc, manifestObjects().filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.metadata?.name === 'annotation-writers.ownerrefs.dev'));
    }
    const sorted = [...lifetimes].sort((a, b) => a - b);
    console.log(`how long a lie planted at creation lives on a pod bound to the agent's node: median ${((sorted[1]! + sorted[2]!) / 2).toFixed(0)} ms, ${sorted[0]!.toFixed(0)} to ${sorted[3]!.toFixed(0)} ms (4 pods)`);
    await waitFor(async () => (await create(() => e.core, { 'ownerrefs.dev/workload-name': 'again' })).code === 403 || undefined, { describe: 'the policy enforced again' });
  });

  it('a user who pads a pod\'s other annotations to the limit: the agent\'s write is refused (422), said in an Event naming the cause, retried, and lands once there is room', async () => {
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'padded' },
      spec: { nodeName: e.nodeName, containers: [{ name: 'c', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${OURS}']` } } }] }] } } });
    const read = () => e.core.readNamespacedPod({ name: 'padded', namespace: e.ns });
    const first = await waitFor(async () => (await read()).metadata?.annotations?.[OURS], { describe: 'the agent\'s value' });
    const used = Buffer.byteLength(OURS) + Buffer.byteLength(first) + Buffer.byteLength('padding');
    await patchPod(editor, 'padded', { metadata: { annotations: { padding: 'x'.repeat(256 * 1024 - used - 20) } } });
    const owner = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'padded-owner' } } });
    await e.core.patchNamespacedPod({ name: 'padded', namespace: e.ns, body: { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'padded-owner', uid: owner.metadata!.uid! }] } } }, mergePatch);
    const said = await waitFor(async () => (await e.core.listNamespacedEvent({ namespace: e.ns, fieldSelector: 'involvedObject.name=padded,reason=OwnerRefsAnnotationFailed' })).items[0]?.message,
      { describe: 'the agent\'s Event' });
    expect(said).toMatch(/^could not set ownerrefs\.dev\/owner-references \(the pod's annotations are full: .*\): .*Too long: (may not be (more|longer) than|must have at most) 262144/);
    expect(await e.agent.metric('ownerrefs_annotation_writes_total', 'result="invalid"')).toBeGreaterThan(0);
    expect((await read()).metadata!.annotations![OURS]).toBe(first);
    await patchPod(editor, 'padded', { metadata: { annotations: { padding: null } } });
    await waitFor(async () => (await read()).metadata?.annotations?.[OURS]?.includes(owner.metadata!.uid!) || undefined, { describe: 'the value written once there is room', timeoutMs: 90_000 });
  });

  it('a cluster admin who impersonates the agent\'s ServiceAccount, with its node\'s name, writes as the agent would, and only that (SECURITY.md says so)', async () => {
    const asAgent: Identity = { user: 'system:serviceaccount:ownerrefs-system:ownerrefs-agent', groups: ['system:serviceaccounts', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/node-name': e.nodeName } };
    const podPatch = (body: object) => request(asAgent, 'PATCH', `/api/v1/namespaces/${e.ns}/pods/target`, body, 'application/merge-patch+json');
    expect(await podPatch({ metadata: { annotations: { 'ownerrefs.dev/workload-name': 'impersonated' } } })).toEqual({ code: 200, message: '' });
    const label = await podPatch({ metadata: { labels: { stolen: 'yes' } } });
    expect({ code: label.code, refused: /ValidatingAdmissionPolicy 'ownerrefs-agent\.ownerrefs\.dev'.*may not change a pod's labels/.test(label.message) }).toEqual({ code: 403, refused: true });
    // Undone by the same means, so the tests after this one see the pod as the agent keeps it.
    expect(await podPatch({ metadata: { annotations: { 'ownerrefs.dev/workload-name': null } } })).toEqual({ code: 200, message: '' });
  });

  it('refuses a server-side apply and a whole-object update that change one', async () => {
    expect((await ssa({ 'ownerrefs.dev/workload-name': 'payments' })).message).toMatch(WRITERS);
    const current = await e.core.readNamespacedPod({ name: 'target', namespace: e.ns });
    delete current.metadata!.annotations![OURS];
    expect((await outcome(editor.replaceNamespacedPod({ name: 'target', namespace: e.ns, body: current }))).message).toMatch(WRITERS);
  });

  it('lets every other change through: a label, another annotation, an apply that leaves ours alone', async () => {
    expect(await patch(editor, { metadata: { labels: { app: 'y' }, annotations: { team: 'checkout' } } })).toEqual({ code: 200, message: '' });
    expect(await ssa({ owner: 'team-a' })).toEqual({ code: 200, message: '' });
    expect((await e.core.readNamespacedPod({ name: 'target', namespace: e.ns })).metadata?.annotations).toMatchObject({ [OURS]: expect.any(String), team: 'checkout', owner: 'team-a' });
  });

  it('lets a cluster admin write one only by deleting the binding (break-glass), and refuses again once it is applied back', async () => {
    const reg = e.kc.makeApiClient(AdmissionregistrationV1Api);
    await reg.deleteValidatingAdmissionPolicyBinding({ name: 'annotation-writers.ownerrefs.dev' });
    try {
      await waitFor(async () => (await patch(e.core, { metadata: { annotations: { 'ownerrefs.dev/workload-name': 'break-glass' } } })).code === 200 || undefined, { describe: 'the write allowed without the binding' });
    } finally {
      await apply(e.kc, manifestObjects().filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.metadata?.name === 'annotation-writers.ownerrefs.dev'));
    }
    // A new value each try: one written before the binding took effect would make the next a no-op.
    await waitFor(async () => (await patch(e.core, { metadata: { annotations: { 'ownerrefs.dev/workload-name': `again-${Date.now()}` } } })).code === 403 || undefined,
      { describe: 'the policy enforced again' });
  });
});
