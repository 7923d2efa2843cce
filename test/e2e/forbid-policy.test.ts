// KEP-4753's mitigation, as the chart installs it with forbidReading.enabled: in namespaces
// labelled ownerrefs.dev/forbid-reading-owners=true, the real API server refuses every pod and
// pod template that reads its owners, in the KEP's syntax (after the webhook's rewrite) or
// through our annotations; elsewhere nothing changes.

import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { apply } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { helmBin, helmTemplate } from '../../scripts/gen-manifests.ts';
import { apiStatus, newNamespace, waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { kepSpec, workload, WORKLOAD_KINDS } from '../support/podspecs.ts';

const READS = "metadata.annotations['ownerrefs.dev/owner-references']";
const readsAnnotation = { containers: [{ name: 'app', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: READS } } }] }] };
const plain = { containers: [{ name: 'app', image: 'busybox', env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }] };

describe('forbidReading: KEP-4753\'s mitigation as a ValidatingAdmissionPolicy', () => {
  const e = useE2E('forbid');
  let webhook: WebhookProcess;
  let forbidden: string;
  const create = async (ns: string, obj: Record<string, unknown>) => {
    const body = { ...obj, metadata: { ...(obj.metadata as object), namespace: ns } } as KubernetesObject;
    return KubernetesObjectApi.makeApiClient(e.kc).create(body, undefined, 'All').then(() => ({ code: 200, message: '' }),
      (err: unknown) => ({ code: apiStatus(err) ?? 0, message: String((err as { body?: unknown }).body) }));
  };
  const pod = (name: string, spec: object) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec });

  beforeAll(async () => {
    const objs = parseAllDocuments(helmTemplate(helmBin(), ['--set', 'forbidReading.enabled=true', '--show-only', 'templates/forbid-policy.yaml']))
      .map((d) => d.toJS() as KubernetesObject).filter(Boolean);
    expect(objs.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    await apply(e.kc, objs);
    webhook = await startWebhook(e.kc, e.kubeletRoot);
    forbidden = (await newNamespace('forbidden', e.kc)).name;
    await e.core.patchNamespace({ name: forbidden, body: { metadata: { labels: { 'ownerrefs.dev/forbid-reading-owners': 'true' } } } }, mergePatch);
    // A policy is enforced about a second after it is created.
    await waitFor(async () => (await create(forbidden, pod('probe', readsAnnotation))).code === 403 || undefined, { describe: 'the policy enforced' });
  }, 300_000);
  afterAll(async () => {
    await webhook?.stop();
    const admission = KubernetesObjectApi.makeApiClient(e.kc);
    for (const kind of ['ValidatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy']) {
      await admission.delete({ apiVersion: 'admissionregistration.k8s.io/v1', kind, metadata: { name: 'forbid-reading-owners.ownerrefs.dev' } }).catch(() => undefined);
    }
  });

  it.each([
    { what: 'a pod in the KEP syntax (refused after the webhook rewrote it)', obj: pod('kep', kepSpec()) },
    { what: 'a pod reading the annotation as written', obj: pod('direct', readsAnnotation) },
    ...WORKLOAD_KINDS.map((kind) => ({ what: `a ${kind} in the KEP syntax`, obj: workload(kind, kepSpec()) })),
  ])('refuses $what in a labelled namespace, with the reason', async ({ obj }) => {
    const r = await create(forbidden, obj);
    expect(r.code).toBe(403);
    expect(r.message).toMatch(/this namespace forbids pods from reading their owners \(KEP-4753, namespace label ownerrefs.dev\/forbid-reading-owners=true\)/);
  });

  it('admits pods that do not read their owners there, and pods that do elsewhere', async () => {
    expect(await create(forbidden, pod('plain', plain))).toEqual({ code: 200, message: '' });
    expect(await create(e.ns, pod('kep', kepSpec()))).toEqual({ code: 200, message: '' });
    expect(await create(e.ns, workload('Deployment', kepSpec()))).toEqual({ code: 200, message: '' });
  });
});
