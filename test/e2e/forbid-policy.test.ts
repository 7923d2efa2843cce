// KEP-4753's mitigation, as the chart installs it with forbidReading.enabled: in namespaces
// labelled ownerrefs.dev/forbid-reading-owners=true, the real API server refuses every pod and
// pod template that starts reading its owners, in the KEP's syntax (after the webhook's
// rewrite), through our annotations, through an ownerrefs.dev CSI volume or through the
// ownerrefs.dev/volume annotation; objects that read them before the label may still be
// updated and deleted; elsewhere nothing changes.

import { KubernetesObjectApi, PatchStrategy, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { apply } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { helmBin, helmTemplate } from '../../scripts/gen-manifests.ts';
import { apiStatus, newNamespace, waitFor, type TestNamespace } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { kepEnv, kepSpec, workload, WORKLOAD_KINDS } from '../support/podspecs.ts';

const LABEL = 'ownerrefs.dev/forbid-reading-owners';
const READS = "metadata.annotations['ownerrefs.dev/owner-references']";
const readsAnnotation = { containers: [{ name: 'app', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: READS } } }] }] };
const plain = { containers: [{ name: 'app', image: 'busybox', env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }] };
const csiSpec = { containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', csi: { driver: 'ownerrefs.dev' } }] };
const emptyDirSpec = { containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] };
const OPT_IN = { 'ownerrefs.dev/volume': 'podinfo' };
const REFUSED = /this namespace forbids pods from reading their owners \(KEP-4753, namespace label ownerrefs.dev\/forbid-reading-owners=true\)/;
const WAY = {
  fieldRef: /this one reads them through a fieldRef/,
  csi: /this one reads them through a CSI volume of the driver ownerrefs.dev/,
  emptyDir: /this one reads them through the annotation ownerrefs.dev\/volume/,
};
/** A finalizer of the test's own, holding a pod as a controller's finalizer would. */
const HOLD = 'e2e.ownerrefs.dev/hold';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Outcome = { code: number; message: string };

/** The outcome of an API call: 200, or the refusal's status and body. */
const outcome = (p: Promise<unknown>): Promise<Outcome> => p.then(() => ({ code: 200, message: '' }),
  (err: unknown) => ({ code: apiStatus(err) ?? 0, message: String((err as { body?: unknown }).body ?? err) }));

describe('forbidReading: KEP-4753\'s mitigation as a ValidatingAdmissionPolicy', () => {
  const e = useE2E('forbid');
  let webhook: WebhookProcess;
  let forbidden: string;
  const namespaces: TestNamespace[] = [];
  const objects = () => KubernetesObjectApi.makeApiClient(e.kc);
  const inNs = (ns: string, obj: Record<string, unknown>) => ({ ...obj, metadata: { ...(obj.metadata as object), namespace: ns } }) as KubernetesObject;
  /** A dry-run CREATE: admission runs, nothing is stored. */
  const create = (ns: string, obj: Record<string, unknown>) => outcome(objects().create(inNs(ns, obj), undefined, 'All'));
  /** A JSON merge patch. */
  const patch = (ns: string, obj: Record<string, unknown>) =>
    outcome(objects().patch(inNs(ns, obj), undefined, undefined, undefined, undefined, PatchStrategy.MergePatch));
  const pod = (name: string, spec: object, annotations?: Record<string, string>) =>
    ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, ...(annotations ? { annotations } : {}) }, spec });
  /** A merge patch of a pod's metadata. */
  const podMeta = (name: string, metadata: object) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, ...metadata } });
  const withTemplateAnnotations = (obj: Obj, annotations: Record<string, string>) => {
    obj.spec.template.metadata.annotations = annotations;
    return obj;
  };
  /** Labels `ns` and waits until the policy refuses there (the binding sees namespaces through an informer). */
  const label = async (ns: string) => {
    await e.core.patchNamespace({ name: ns, body: { metadata: { labels: { [LABEL]: 'true' } } } }, mergePatch);
    // A policy is enforced about a second after it is created, and a label after the informer sees it.
    await waitFor(async () => (await create(ns, pod('probe', readsAnnotation))).code === 403 || undefined, { describe: `the policy enforced in ${ns}` });
  };

  beforeAll(async () => {
    const objs = parseAllDocuments(helmTemplate(helmBin(), ['--set', 'forbidReading.enabled=true', '--show-only', 'templates/forbid-policy.yaml']))
      .map((d) => d.toJS() as KubernetesObject).filter(Boolean);
    expect(objs.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    await apply(e.kc, objs);
    webhook = await startWebhook(e.kc, e.kubeletRoot);
    const ns = await newNamespace('forbidden', e.kc);
    namespaces.push(ns);
    forbidden = ns.name;
    await label(forbidden);
  }, 300_000);
  afterAll(async () => {
    const admission = objects();
    for (const kind of ['ValidatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy']) {
      await admission.delete({ apiVersion: 'admissionregistration.k8s.io/v1', kind, metadata: { name: 'forbid-reading-owners.ownerrefs.dev' } }).catch(() => undefined);
    }
    // While the file's kubelet emulator still runs: its pods terminate.
    for (const ns of namespaces) await ns.cleanup();
    await webhook?.remove(); // the shared API server: no registration left behind
  }, 300_000);

  it.each([
    { what: 'a pod in the KEP syntax (refused after the webhook rewrote it)', obj: pod('kep', kepSpec()), way: WAY.fieldRef },
    { what: 'a pod reading the annotation as written', obj: pod('direct', readsAnnotation), way: WAY.fieldRef },
    ...WORKLOAD_KINDS.map((kind) => ({ what: `a ${kind} in the KEP syntax`, obj: workload(kind, kepSpec()), way: WAY.fieldRef })),
    { what: 'a pod with an ownerrefs.dev CSI volume', obj: pod('csi', csiSpec), way: WAY.csi },
    ...WORKLOAD_KINDS.map((kind) => ({ what: `a ${kind} whose template has an ownerrefs.dev CSI volume`, obj: workload(kind, csiSpec), way: WAY.csi })),
    { what: 'a pod with the ownerrefs.dev/volume annotation', obj: pod('opt-in', emptyDirSpec, OPT_IN), way: WAY.emptyDir },
    { what: 'a Deployment whose template has the ownerrefs.dev/volume annotation', obj: withTemplateAnnotations(workload('Deployment', emptyDirSpec), OPT_IN), way: WAY.emptyDir },
    { what: 'a CronJob whose template has the ownerrefs.dev/volume annotation', obj: (() => {
      const cj = workload('CronJob', emptyDirSpec) as Obj;
      cj.spec.jobTemplate.spec.template.metadata.annotations = OPT_IN;
      return cj;
    })(), way: WAY.emptyDir },
  ])('refuses $what in a labelled namespace, saying which way it reads', async ({ obj, way }) => {
    const r = await create(forbidden, obj);
    expect(r.code).toBe(403);
    expect(r.message).toMatch(REFUSED);
    expect(r.message).toMatch(way);
  });

  it('admits pods that do not read their owners there, and pods that do elsewhere, whichever way they read', async () => {
    expect(await create(forbidden, pod('plain', plain))).toEqual({ code: 200, message: '' });
    // An emptyDir without the annotation, a CSI volume of another driver, another annotation.
    expect(await create(forbidden, pod('other', { ...emptyDirSpec, volumes: [...emptyDirSpec.volumes, { name: 'other', csi: { driver: 'example.com' } }] },
      { 'ownerrefs.dev/other': 'x' }))).toEqual({ code: 200, message: '' });
    for (const obj of [pod('kep', kepSpec()), workload('Deployment', kepSpec()), pod('csi', csiSpec), workload('Deployment', csiSpec),
      pod('opt-in', emptyDirSpec, OPT_IN), withTemplateAnnotations(workload('Deployment', emptyDirSpec), OPT_IN)]) {
      expect({ kind: obj.kind, ...await create(e.ns, obj) }).toEqual({ kind: obj.kind, code: 200, message: '' });
    }
  });

  it('refuses an UPDATE that starts reading: the KEP syntax added to a Deployment\'s template, the annotation added to a pod; other updates pass', async () => {
    const d = { ...workload('Deployment', plain), metadata: { name: 'grows' } } as Obj;
    d.spec.replicas = 0;
    await e.apps.createNamespacedDeployment({ namespace: forbidden, body: d as never });
    expect(await patch(forbidden, { ...d, spec: { replicas: 1 } })).toEqual({ code: 200, message: '' });
    for (const [template, way] of [[{ spec: kepSpec() }, WAY.fieldRef], [{ spec: csiSpec }, WAY.csi], [{ metadata: { annotations: OPT_IN } }, WAY.emptyDir]] as const) {
      const r = await patch(forbidden, { ...d, spec: { replicas: 0, template } });
      expect({ code: r.code, refused: REFUSED.test(r.message), way: way.test(r.message) }).toEqual({ code: 403, refused: true, way: true });
    }
    // A pod's annotations may change: the opt-in added to a pod that read nothing is refused.
    await e.core.createNamespacedPod({ namespace: forbidden, body: { metadata: { name: 'plain' }, spec: { ...emptyDirSpec, nodeName: e.nodeName, terminationGracePeriodSeconds: 0 } } });
    const r = await patch(forbidden, podMeta('plain', { annotations: OPT_IN }));
    expect({ code: r.code, way: WAY.emptyDir.test(r.message) }).toEqual({ code: 403, way: true });
    expect(await patch(forbidden, podMeta('plain', { annotations: { 'example.com/other': 'x' } }))).toEqual({ code: 200, message: '' });
    // So is an ephemeral container in the KEP syntax (pods/ephemeralcontainers).
    const debug = await outcome(e.core.patchNamespacedPodEphemeralcontainers({ name: 'plain', namespace: forbidden,
      body: { spec: { ephemeralContainers: [{ name: 'debug', image: 'busybox', env: [kepEnv()] }] } } }, mergePatch));
    expect({ code: debug.code, way: WAY.fieldRef.test(debug.message) }).toEqual({ code: 403, way: true });
  });

  it('objects that read their owners before the namespace was labelled may still be updated (labels, scaling, the garbage collector, finalizers, the agent) and deleted', async () => {
    const later = await newNamespace('forbid-later', e.kc);
    namespaces.push(later);
    const ns = later.name;
    const owner = await e.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'owner' } } });
    const ownerUid = owner.metadata!.uid!;
    await e.core.createNamespacedPod({ namespace: ns, body: {
      metadata: { name: 'reader', labels: { app: 'reader' }, finalizers: [HOLD],
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: ownerUid }] },
      spec: { ...kepSpec(), nodeName: e.nodeName, terminationGracePeriodSeconds: 0 } } as V1Pod });
    const readPod = () => e.core.readNamespacedPod({ name: 'reader', namespace: ns });
    const ownersAnnotation = async () => (await readPod()).metadata?.annotations?.['ownerrefs.dev/owner-references'] ?? '';
    expect(await ownersAnnotation()).toContain(ownerUid); // the webhook set it
    const d = { ...workload('Deployment', { ...kepSpec(), terminationGracePeriodSeconds: 0 }), metadata: { name: 'reader' } } as Obj;
    d.spec.replicas = 1;
    await e.apps.createNamespacedDeployment({ namespace: ns, body: d as never });
    await waitFor(async () => (await e.core.listNamespacedPod({ namespace: ns, labelSelector: 'app=x' })).items.length === 1 || undefined,
      { describe: 'the Deployment\'s pod' });

    await label(ns);

    // The pod: a label changed; the garbage collector orphans it (its PATCH of the pod's
    // ownerReferences) and the agent then updates the annotation it reads (its PATCH).
    expect(await patch(ns, podMeta('reader', { labels: { app: 'reader', changed: 'yes' } }))).toEqual({ code: 200, message: '' });
    await e.core.deleteNamespacedConfigMap({ name: 'owner', namespace: ns, propagationPolicy: 'Orphan' });
    await waitFor(async () => ((await readPod()).metadata?.ownerReferences ?? []).length === 0 || undefined, { describe: 'the garbage collector orphans the pod' });
    await waitFor(async () => (await e.core.readNamespacedConfigMap({ name: 'owner', namespace: ns }).then(() => false, (err: unknown) => apiStatus(err) === 404)) || undefined,
      { describe: 'the owner gone (the garbage collector removed its orphan finalizer)' });
    await waitFor(async () => !(await ownersAnnotation()).includes(ownerUid) || undefined, { describe: 'the agent updates the pod\'s annotation' });
    // Deleted: held by a finalizer, which is then removed (a controller's PATCH).
    await e.core.deleteNamespacedPod({ name: 'reader', namespace: ns, gracePeriodSeconds: 0 });
    expect(await patch(ns, podMeta('reader', { finalizers: null }))).toEqual({ code: 200, message: '' });
    await waitFor(async () => (await readPod().then(() => false, (err: unknown) => apiStatus(err) === 404)) || undefined, { describe: 'the pod gone' });

    // The Deployment: scaled (its controller then scales the ReplicaSet; the new pod itself is refused).
    expect(await patch(ns, { ...d, spec: { replicas: 2 } })).toEqual({ code: 200, message: '' });
    const rs = await waitFor(async () => (await e.apps.listNamespacedReplicaSet({ namespace: ns })).items.find((r) =>
      r.spec?.replicas === 2 && r.status?.conditions?.some((c) => c.type === 'ReplicaFailure' && REFUSED.test(c.message ?? ''))),
    { describe: 'the ReplicaSet scaled to 2, its new pod refused' });
    expect(rs.status?.conditions?.find((c) => c.type === 'ReplicaFailure')?.message).toMatch(WAY.fieldRef);
    // Deleted in the foreground: the garbage collector removes the foregroundDeletion finalizers.
    await e.apps.deleteNamespacedDeployment({ name: 'reader', namespace: ns, propagationPolicy: 'Foreground' });
    await waitFor(async () => (await e.apps.readNamespacedDeployment({ name: 'reader', namespace: ns }).then(() => false, (err: unknown) => apiStatus(err) === 404)) || undefined,
      { describe: 'the Deployment gone (foreground deletion)' });
    expect((await e.apps.listNamespacedReplicaSet({ namespace: ns })).items).toEqual([]);
  }, 300_000);

  it('keeps the CEL within the API server\'s cost budget for large, realistic objects, on CREATE and UPDATE', async () => {
    // 10 containers of 60 env each (fieldRefs among them), 40 volumes (downwardAPI and
    // projected ones with items), 30 annotations on the template.
    const container = (i: number, last?: object) => ({ name: `c${i}`, image: 'busybox', env: [
      ...Array.from({ length: 59 }, (_, j) => j % 3 === 0 ? { name: `F${j}`, valueFrom: { fieldRef: { fieldPath: 'metadata.labels[\'app\']' } } } : { name: `V${j}`, value: `value-${j}` }),
      last ?? { name: 'LAST', value: 'x' }] });
    const items = Array.from({ length: 8 }, (_, j) => ({ path: `f${j}`, fieldRef: { fieldPath: 'metadata.labels' } }));
    const volumes = Array.from({ length: 40 }, (_, j) => j % 2 === 0 ? { name: `d${j}`, downwardAPI: { items } }
      : { name: `p${j}`, projected: { sources: [{ downwardAPI: { items } }, { configMap: { name: 'x', optional: true } }] } });
    const spec = (last?: object) => ({ containers: Array.from({ length: 10 }, (_, i) => container(i, i === 9 ? last : undefined)), volumes });
    const big = (last?: object) => {
      const d = { ...workload('Deployment', spec(last)), metadata: { name: 'big' } } as Obj;
      d.spec.replicas = 0;
      d.spec.template.metadata.annotations = Object.fromEntries(Array.from({ length: 30 }, (_, j) => [`example.com/a${j}`, 'x']));
      return d;
    };
    await e.apps.createNamespacedDeployment({ namespace: forbidden, body: big() as never });
    expect(await patch(forbidden, big({ name: 'LAST', value: 'y' }))).toEqual({ code: 200, message: '' });
    const r = await patch(forbidden, big({ name: 'LAST', valueFrom: { fieldRef: { fieldPath: READS } } }));
    expect({ code: r.code, way: WAY.fieldRef.test(r.message) }).toEqual({ code: 403, way: true });
    const c = await create(forbidden, { ...big({ name: 'LAST', valueFrom: { fieldRef: { fieldPath: READS } } }), metadata: { name: 'big2' } });
    expect({ code: c.code, way: WAY.fieldRef.test(c.message) }).toEqual({ code: 403, way: true });
  });
});
