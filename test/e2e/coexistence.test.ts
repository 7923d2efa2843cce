// The product beside the admission webhooks clusters already run, on the real node, through
// the agent's real token: a policy engine's webhook that changes every pod update (which makes
// the agent's policy refuse its writes, until RUNBOOKS.md's exemption is applied as written),
// and an injector that extends OTEL_RESOURCE_ATTRIBUTES the way the OpenTelemetry operator's
// SDK injection does, read back by OpenTelemetry's own SDK (test/support/otel).

import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { AdmissionregistrationV1Api, type KubernetesObject, type V1Container, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { apply } from '../../localcluster/agentproc.ts';
import { controlPlaneBinaries } from '../../localcluster/controlplane/controlplane.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { ROOT, yamlBlocks } from '../support/docblocks.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';
import { pointer, startTestWebhook, type AdmissionRequest, type JsonPatchOp } from '../../localcluster/testwebhook.ts';

const OWNERS = 'ownerrefs.dev/owner-references';
const OTEL_SDK = path.join(ROOT, 'test', 'support', 'otel', 'detect.mjs');

/** What OpenTelemetry's JavaScript SDK detects from an environment holding only `OTEL_RESOURCE_ATTRIBUTES=value`. */
const sdkResource = (value: string): Record<string, string> => JSON.parse(execFileSync(process.execPath, [OTEL_SDK],
  { cwd: path.dirname(OTEL_SDK), env: { PATH: process.env.PATH, OTEL_RESOURCE_ATTRIBUTES: value }, encoding: 'utf8' })) as Record<string, string>;

/**
 * The OpenTelemetry operator's SDK injection, as its code does it: for each container, the
 * pod name by the downward API, and `k8s.*` and `service.name` (from the pod's controller:
 * a ReplicaSet, and its Deployment by the name's hash suffix) appended to
 * OTEL_RESOURCE_ATTRIBUTES's `value`, whether or not the variable has a `valueFrom`; keys
 * found in the literal value are not added again.
 */
function otelInjection(req: AdmissionRequest): JsonPatchOp[] {
  const pod = req.object;
  const rs = pod.metadata?.ownerReferences?.find((o) => o.controller && o.kind === 'ReplicaSet')?.name;
  const deployment = rs?.replace(/-[a-z0-9]+$/, '');
  return (pod.spec?.containers ?? []).flatMap((c: V1Container, i) => {
    const env = c.env ?? [];
    const attrs: [string, string][] = [['k8s.container.name', c.name], ['k8s.namespace.name', req.namespace], ['k8s.pod.name', '$(OTEL_RESOURCE_ATTRIBUTES_POD_NAME)'],
      ...rs ? [['k8s.replicaset.name', rs]] as [string, string][] : [], ...deployment ? [['k8s.deployment.name', deployment], ['service.name', deployment]] as [string, string][] : []];
    const at = env.findIndex((v) => v.name === 'OTEL_RESOURCE_ATTRIBUTES');
    const existing = at >= 0 ? env[at]!.value ?? '' : '';
    const added = attrs.filter(([k]) => !existing.includes(`${k}=`)).map(([k, v]) => `${k}=${v}`).join(',');
    const podName = { name: 'OTEL_RESOURCE_ATTRIBUTES_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } };
    const next = at >= 0
      ? env.map((v, j) => (j === at ? { ...v, value: existing ? `${existing},${added}` : added } : v))
      : [...env, { name: 'OTEL_RESOURCE_ATTRIBUTES', value: added }];
    // The pod name's variable before its first use, as the operator places it.
    const where = at >= 0 ? at : env.length;
    return [{ op: 'add', path: `/spec/containers/${i}/env`, value: [...next.slice(0, where), podName, ...next.slice(where)] }] as JsonPatchOp[];
  });
}

describe.runIf(CONTAINERS)('beside other admission webhooks, on a real node', () => {
  const e = useRealNode('coexist', { agentArgs: () => ['--owner-refresh-seconds=2'] });
  const reg = () => e.kc.makeApiClient(AdmissionregistrationV1Api);
  let webhook: WebhookProcess;
  beforeAll(async () => {
    await apply(e.kc, parseAllDocuments(readFileSync(path.join(ROOT, 'rbac-follow-owners.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject).filter(Boolean));
    webhook = await startWebhook(e.kc, e.node.workDir);
  }, 300_000);
  afterAll(async () => { await webhook?.remove(); });

  /** `kubectl ownerrefs ARGS` with the plugin and kubectl on PATH. */
  const plugin = async (...args: string[]) => {
    const bin = await controlPlaneBinaries();
    return new Promise<{ status: number; stdout: string }>((resolve) => execFile('kubectl', ['ownerrefs', ...args],
      { env: { ...process.env, PATH: `${path.join(ROOT, 'kubectl-plugin')}:${bin}:${process.env.PATH}`, KUBECONFIG: e.cp.kubeconfigPath } },
      (err, stdout) => resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout })));
  };
  const running = (selector: string) => e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector }))
    .items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp), `a Running pod ${selector}`, 120_000);

  it('a webhook that changes every pod update: the agent\'s writes are refused and status names the pod and the webhook; RUNBOOKS.md\'s matchConditions, applied as written, lets them through and the file follows the owners', { timeout: 300_000 }, async () => {
    // A policy engine stamping each pod update with the time.
    const stamper = await startTestWebhook(e.kc, { name: 'stamper', namespace: e.ns, operations: ['UPDATE'], mutate: ({ object }) => object.metadata?.annotations
      ? [{ op: 'add', path: `/metadata/annotations/${pointer('policy.example/stamped')}`, value: String(Date.now()) }]
      : [{ op: 'add', path: '/metadata/annotations', value: { 'policy.example/stamped': String(Date.now()) } }] });
    try {
      const owner = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'owner' } } });
      await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'stamped', labels: { app: 'stamped' } }, spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] }],
        volumes: [{ name: 'podinfo', downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: `metadata.annotations['${OWNERS}']` } }] } }],
      } } });
      const pod = await running('app=stamped');
      // Its owner set by its author: the agent's write of the new value meets the stamp, and its policy refuses it.
      await e.core.patchNamespacedPod({ name: 'stamped', namespace: e.ns, body: { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid! }] } } }, mergePatch);
      await e.waitFor(async () => (await e.agent.metric('ownerrefs_annotation_writes_total', 'result="forbidden"')) > 0 || undefined, 'a refused write', 60_000);
      // Counted by who refused and why, as doctor reads it: the agent's own policy, seeing the stamp as the agent's change.
      expect(await e.agent.metric('ownerrefs_annotation_refusals_total', 'by="ValidatingAdmissionPolicy ownerrefs-agent.ownerrefs.dev",reason="the ownerrefs agent may change no annotation but ')).toBeGreaterThan(0);
      const refused = await e.waitFor(async () => { const s = await plugin('status'); return s.stdout.includes(`${e.ns}/stamped:`) ? s.stdout : undefined; }, 'status lists the pod');
      expect(refused).toMatch(new RegExp(`^  ${e.ns}/stamped: could not set ${OWNERS}: .*ValidatingAdmissionPolicy 'ownerrefs-agent\\.ownerrefs\\.dev'`, 'm'));
      expect(refused).toMatch(/^  mutating webhooks that see the agent's pod updates .*\n    stamper\.webhooks\.test$/m);
      expect(await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences'])).not.toContain('"kind":"ConfigMap"');

      // RUNBOOKS.md's first form, as written, on the stamper's webhook.
      const { matchConditions } = yamlBlocks('docs/RUNBOOKS.md', 'OwnerRefsAnnotationWritesRefused')[0] as { matchConditions: unknown };
      await reg().patchMutatingWebhookConfiguration({ name: 'stamper', body: [{ op: 'add', path: '/webhooks/0/matchConditions', value: matchConditions }] });
      const file = await e.waitFor(async () => {
        const text = await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences']).catch(() => '');
        return text.includes('"kind":"ConfigMap"') ? text : undefined;
      }, 'the file names the owner once the agent is exempted', 120_000);
      expect(JSON.parse(file)).toMatchObject({ items: [{ kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid }] });
      // Exempted, the stamper no longer counts among the webhooks that see the agent's writes, and it still stamps everyone else's.
      const exempted = (await plugin('status')).stdout;
      expect(exempted).toContain(`${e.ns}/stamped:`); // the Events stay
      expect(exempted).not.toContain('stamper.webhooks.test');
      const before = (await e.core.readNamespacedPod({ name: 'stamped', namespace: e.ns })).metadata!.annotations!['policy.example/stamped'];
      await e.core.patchNamespacedPod({ name: 'stamped', namespace: e.ns, body: { metadata: { labels: { touched: 'yes' } } } }, mergePatch);
      expect((await e.core.readNamespacedPod({ name: 'stamped', namespace: e.ns })).metadata!.annotations!['policy.example/stamped']).not.toBe(before);
    } finally {
      await stamper.remove();
    }
  });

  /** A pod that reads its owners in a file, Running, and the owner its author then sets (the agent's write follows). */
  const readerWithNewOwner = async (name: string) => {
    const owner = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: `${name}-owner` } } });
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name, labels: { app: name } }, spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] }],
      volumes: [{ name: 'podinfo', downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: `metadata.annotations['${OWNERS}']` } }] } }],
    } } });
    const pod = await running(`app=${name}`);
    await e.core.patchNamespacedPod({ name, namespace: e.ns, body: { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.metadata!.name!, uid: owner.metadata!.uid! }] } } }, mergePatch);
    return { pod, owner };
  };
  const agentUser = 'system:serviceaccount:ownerrefs-system:ownerrefs-agent';
  const warnings = async (name: string) => (await e.core.listNamespacedEvent({ namespace: e.ns, fieldSelector: `involvedObject.name=${name},reason=OwnerRefsAnnotationFailed` })).items.map((ev) => ev.message!);

  it.each([
    { what: 'a webhook that answers 200 but puts the old value back: the write did not stick (overridden)', name: 'reverted', result: 'overridden', says: /^could not keep ownerrefs\.dev\/owner-references \(stored .*\): the API server answered the agent's PATCH but stored other values/,
      hook: { mutate: (r: AdmissionRequest) => (r.userInfo.username === agentUser && r.oldObject?.metadata?.annotations?.[OWNERS] !== undefined
        ? [{ op: 'replace', path: `/metadata/annotations/${pointer(OWNERS)}`, value: r.oldObject.metadata.annotations[OWNERS] }] as JsonPatchOp[] : []) } },
    { what: 'a policy engine that refuses with a 400, as Kyverno\'s Enforce does (refused)', name: 'denied', result: 'refused', says: /^could not set ownerrefs\.dev\/owner-references: .*admission webhook "denier\.webhooks\.test" denied the request: policy require-team/,
      hook: { mutate: () => [], deny: (r: AdmissionRequest) => (r.userInfo.username === agentUser ? { code: 400, message: 'policy require-team: the pod has no team label' } : undefined) } },
  ])('$what: an Event on the pod, counted for the alert, listed by status; the write sticks once the webhook lets it', { timeout: 300_000 }, async ({ name, result, says, hook }) => {
    const webhook = await startTestWebhook(e.kc, { name: name === 'reverted' ? 'reverter' : 'denier', namespace: e.ns, operations: ['UPDATE'], ...hook });
    let removed = false;
    try {
      const { pod, owner } = await readerWithNewOwner(name);
      await e.waitFor(async () => (await e.agent.metric('ownerrefs_annotation_writes_total', `result="${result}"`)) > 0 || undefined, `a write ${result}`, 60_000);
      const said = await e.waitFor(async () => (await warnings(name)).find((m) => says.test(m)), 'its Warning Event', 30_000);
      expect(said).toMatch(says);
      const status = await e.waitFor(async () => { const s = await plugin('status'); return s.stdout.includes(`${e.ns}/${name}:`) ? s.stdout : undefined; }, 'status lists the pod');
      expect(status).toMatch(new RegExp(`^  ${e.ns}/${name}: could not `, 'm'));
      expect(await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences'])).not.toContain('"kind":"ConfigMap"');
      await webhook.remove();
      removed = true;
      // Kept, not forgotten: the agent's next retry writes it.
      const file = await e.waitFor(async () => {
        const text = await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences']).catch(() => '');
        return text.includes('"kind":"ConfigMap"') ? text : undefined;
      }, 'the file names the owner once the webhook lets the write through', 120_000);
      expect(JSON.parse(file)).toMatchObject({ items: [{ kind: 'ConfigMap', uid: owner.metadata!.uid }] });
    } finally {
      if (!removed) await webhook.remove();
    }
  });

  it('the OpenTelemetry operator\'s injection, before or after ours: the documented form is admitted, and the SDK reads the workload\'s attributes once each, agreeing with the injector\'s', { timeout: 300_000 }, async () => {
    const example = parse(readFileSync(path.join(ROOT, 'examples', 'workload-identity', 'deployment-otel.yaml'), 'utf8')) as V1Deployment;
    // The API server calls mutating webhooks in the order of their configurations' names: "ownerrefs.dev" sorts between these two.
    for (const name of ['aa-otel-injector', 'zz-otel-injector']) {
      const injector = await startTestWebhook(e.kc, { name, namespace: e.ns, operations: ['CREATE'], mutate: otelInjection });
      try {
        // The form the docs warn against (our annotation read by valueFrom) is refused: the injector extends its value.
        const direct = await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: `direct-${name}` }, spec: { containers: [{ name: 'app', image: IMAGES.busybox,
          env: [{ name: 'OTEL_RESOURCE_ATTRIBUTES', valueFrom: { fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/otel-resource-attributes']" } } }] }] } } })
          .then(() => 'admitted', (err: { body?: unknown }) => String(err.body ?? err));
        expect(direct).toMatch(/valueFrom: Invalid value: \\?"\\?": may not be specified when .value. is not empty/);

        // The example as written, its image the node's busybox.
        const app = `checkout-${name.slice(0, 2)}`;
        const d = structuredClone(example);
        d.metadata!.name = app;
        d.spec!.replicas = 1;
        d.spec!.selector.matchLabels = { app };
        d.spec!.template.metadata!.labels = { app };
        Object.assign(d.spec!.template.spec!.containers[0]!, { image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent' });
        const created = await e.apps.createNamespacedDeployment({ namespace: e.ns, body: d });
        const pod: V1Pod = await running(`app=${app}`);
        const rs = pod.metadata!.ownerReferences![0]!;
        const value = await e.exec(pod, ['sh', '-c', 'printf %s "$OTEL_RESOURCE_ATTRIBUTES"']);
        const attrs = sdkResource(value);
        expect(attrs).toMatchObject({
          'k8s.deployment.name': app, 'k8s.deployment.uid': created.metadata!.uid, 'k8s.replicaset.name': rs.name, 'k8s.replicaset.uid': rs.uid,
          'k8s.pod.name': pod.metadata!.name, 'k8s.namespace.name': e.ns, 'k8s.container.name': 'app', 'service.name': app,
        });
        // Once each: every key the variable names twice (ours and the injector's) has one value in both places.
        const pairs = value.split(',').map((p) => p.split('=') as [string, string]);
        for (const [k, v] of pairs) expect(decodeURIComponent(v), `${k} in ${value}`).toBe(attrs[k]);
        expect(pairs.filter(([k]) => k === 'k8s.deployment.uid')).toHaveLength(1);
        expect(value.startsWith(await e.exec(pod, ['sh', '-c', 'printf %s "$OWNERREFS_OTEL_RESOURCE_ATTRIBUTES"']))).toBe(true);
      } finally {
        await injector.remove();
      }
    }
  });
});
