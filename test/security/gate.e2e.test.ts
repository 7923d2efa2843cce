// The gate's lifter's one write privilege, `patch pods` in every namespace (admission.mode=policy),
// attacked with its own credentials (a token of its ServiceAccount, with the RBAC of
// admission-policy.yaml) against the real API server: its ValidatingAdmissionPolicy
// (agent/manifests/gate.ts, shipped in admission-policy.yaml) lets it do what lifting a gate is,
// on a pod not bound yet that carries the gate, and nothing else.

import path from 'node:path';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATE_NAME, GATE_POLICY_NAME } from '../../agent/manifests/gate.ts';
import { apply, serviceAccountKubeconfig } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { GATED_LABEL, SCHEDULING_GATE, WEBHOOK_NAMESPACE } from '../../projections/names.ts';
import { shipped, shippedGateRbac } from '../support/admissionpolicy.ts';
import { outcome, waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { tmpDir } from '../support/tmpdir.ts';

const NAME = 'ownerrefs.dev/workload-name';
const POLICY = new RegExp(`ValidatingAdmissionPolicy '${GATE_POLICY_NAME.replaceAll('.', '\\.')}' with binding '${GATE_POLICY_NAME.replaceAll('.', '\\.')}' denied request: `);
const OTHER_GATE = 'example.com/hold';

type Op = { op: string; path: string; value?: unknown };
const seg = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');

describe("the gate's lifter's credentials against its ValidatingAdmissionPolicy", () => {
  const e = useE2E('secgate');
  let gate: CoreV1Api;
  let objects: KubernetesObjectApi;
  const policy = shipped().filter((o) => o.metadata?.name === GATE_POLICY_NAME);
  let n = 0;

  /** A pod the policy would have gated (ours after another's gate, and the label), or one bound to a node. */
  const pod = (over: { gates?: string[]; nodeName?: string } = {}) => e.core.createNamespacedPod({ namespace: e.ns, body: {
    metadata: { name: `p${n++}`, labels: { app: 'x', [GATED_LABEL]: '' }, annotations: { keep: 'me' } },
    spec: { ...over.nodeName ? { nodeName: over.nodeName } : { schedulingGates: (over.gates ?? [OTHER_GATE, SCHEDULING_GATE]).map((name) => ({ name })) },
      containers: [{ name: 'c', image: 'busybox', env: [{ name: 'W', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${NAME}']` } } }] }] },
  } });
  const jsonPatch = (p: V1Pod, ops: Op[]) => outcome(gate.patchNamespacedPod({ name: p.metadata!.name!, namespace: e.ns, body: ops }));
  /** What the lifter sends: the value, our gate (index 1) and the label removed. */
  const lift = (extra: Op[] = []): Op[] => [
    { op: 'add', path: `/metadata/annotations/${seg(NAME)}`, value: 'web' },
    { op: 'remove', path: '/spec/schedulingGates/1' },
    { op: 'remove', path: `/metadata/labels/${seg(GATED_LABEL)}` },
    ...extra,
  ];

  beforeAll(async () => {
    objects = KubernetesObjectApi.makeApiClient(e.kc);
    await apply(e.kc, shippedGateRbac());
    for (const o of policy) await objects.create(o as KubernetesObject);
    const kc = new KubeConfig();
    kc.loadFromFile(await serviceAccountKubeconfig(e.kc, { namespace: WEBHOOK_NAMESPACE, name: GATE_NAME }, path.join(tmpDir(), 'gate.kubeconfig')));
    gate = kc.makeApiClient(CoreV1Api);
    // A policy is enforced about a second after it is created: wait until a label change is refused.
    let last: unknown;
    await waitFor(async () => (last = await jsonPatch(await pod(), lift([{ op: 'add', path: '/metadata/labels/probe', value: 'x' }]))) && (last as { code: number }).code === 403 || undefined,
      { describe: 'the policy enforced', diagnostics: async () => `last answer: ${JSON.stringify(last)}\npolicy status: ${JSON.stringify((await objects.read(policy[0] as never) as { status?: unknown }).status)}` });
  });
  afterAll(async () => {
    for (const o of policy) await objects.delete(o as KubernetesObject).catch(() => undefined);
  });

  it('lifts its gate: writes the value, removes its gate and the label, in one PATCH', async () => {
    const p = await pod();
    expect(await jsonPatch(p, lift())).toEqual({ code: 200, message: '' });
    const now = await e.core.readNamespacedPod({ name: p.metadata!.name!, namespace: e.ns });
    expect({ gates: now.spec!.schedulingGates, labels: now.metadata!.labels, annotations: now.metadata!.annotations })
      .toEqual({ gates: [{ name: OTHER_GATE }], labels: { app: 'x' }, annotations: { keep: 'me', [NAME]: 'web' } });
  });

  it.each([
    ['a pod\'s image changed', lift([{ op: 'replace', path: '/spec/containers/0/image', value: 'evil' }]), /may not change a pod's spec but its scheduling gate/],
    ['another\'s gate removed too', [...lift().slice(0, 1), { op: 'remove', path: '/spec/schedulingGates/1' }, { op: 'remove', path: '/spec/schedulingGates/0' }, lift()[2]!], /may remove the scheduling gate ownerrefs\.dev\/workload-values and no other/],
    ['a label added', lift([{ op: 'add', path: '/metadata/labels/team', value: 'evil' }]), /may remove the label ownerrefs\.dev\/gated and change no other/],
    ['an annotation not ours written', lift([{ op: 'add', path: '/metadata/annotations/example.com~1x', value: 'evil' }]), /may add or change no annotation but/],
    ['an annotation not ours removed', lift([{ op: 'remove', path: '/metadata/annotations/keep' }]), /may add or change no annotation but .*, and remove none/],
    // (An owner reference is refused before the policy is asked, where the API server enforces
    // owner permissions: the lifter may delete nothing.)
    ['a finalizer set', lift([{ op: 'add', path: '/metadata/finalizers', value: ['example.com/keep'] }]), /may not change a pod's ownerReferences or finalizers/],
    ['a toleration added', lift([{ op: 'add', path: '/spec/tolerations/-', value: { key: 'k', operator: 'Exists', effect: 'NoSchedule' } }]), /may not change a pod's spec but its scheduling gate/],
  ] as const)('refuses a lift with %s', async (_what, ops, message) => {
    const r = await jsonPatch(await pod(), [...ops]);
    expect(r.code).toBe(403);
    expect(r.message).toMatch(POLICY);
    expect(r.message).toMatch(message);
  });

  it('refuses its ownerrefs.dev/ annotations on a pod that carries no gate of its own, or is bound', async () => {
    for (const p of [await pod({ gates: [OTHER_GATE] }), await pod({ nodeName: 'somewhere' })]) {
      const r = await outcome(gate.patchNamespacedPod({ name: p.metadata!.name!, namespace: e.ns, body: { metadata: { annotations: { [NAME]: 'lie' } } } }, mergePatch));
      expect(r.code).toBe(403);
      expect(r.message).toMatch(/may change only pods not bound yet that carry the scheduling gate/);
    }
  });

  it('has no write on pods/status, pods/binding or other resources (RBAC)', async () => {
    const p = await pod();
    const name = p.metadata!.name!;
    const status = await outcome(gate.patchNamespacedPodStatus({ name, namespace: e.ns, body: { metadata: { annotations: { [NAME]: 'lie' } } } }, mergePatch));
    const binding = await outcome(gate.createNamespacedBinding({ namespace: e.ns, body: { metadata: { name, annotations: { [NAME]: 'lie' } }, target: { kind: 'Node', name: 'somewhere' } } }));
    const cm = await outcome(gate.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'x' } } }));
    expect([status.code, binding.code, cm.code]).toEqual([403, 403, 403]);
  });
});
