// The workload's identity beside name parsing, on the real control plane with the real
// controllers: for workloads whose names defeat parsing, what the pods' annotations say
// (the webhook at admission, the agent afterwards) against what a parser in the style of the
// OpenTelemetry collector's k8sattributes processor would say from the owner's name alone
// (a ReplicaSet's name less its last "-suffix" is a Deployment; a Job's name less its last
// "-digits" is a CronJob). Ours must be right in every row; the table in
// docs/usage/workload-identity.md must be the one this test finds.

import path from 'node:path';
import { readFileSync } from 'node:fs';
import { ApiextensionsV1Api, BatchV1Api, CustomObjectsApi, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { apply } from '../../localcluster/agentproc.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const ROLLOUT = 'argoproj.io/v1alpha1/Rollout=rollouts';
const podSpec = { terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'busybox',
  env: ['workload-kind', 'workload-name'].map((k) => ({ name: k, valueFrom: { fieldRef: { fieldPath: `metadata.annotations['ownerrefs.dev/${k}']` } } })) }] };
const template = (labels: Record<string, string>) => ({ metadata: { labels }, spec: podSpec });

/** What name parsing makes of a pod's controller: a guess from its name alone. */
function parsed(controller: { kind: string; name: string }): string {
  if (controller.kind === 'ReplicaSet') return `Deployment ${controller.name.replace(/-[0-9a-zA-Z]+$/, '')}`;
  if (controller.kind === 'Job') {
    const m = /^(.*)-\d+$/.exec(controller.name);
    return m ? `CronJob ${m[1]}` : `Job ${controller.name}`;
  }
  return `${controller.kind} ${controller.name}`;
}

describe('the workload beside name parsing', () => {
  const e = useE2E('wlnames', { agentArgs: ['--owner-refresh-seconds=2', `--follow-kinds=${ROLLOUT}`] });
  let webhook: WebhookProcess;
  const rows: { row: string; ours: string; parsing: string; truth: string }[] = [];

  beforeAll(async () => {
    await apply(e.kc, parseAllDocuments(readFileSync(path.join(ROOT, 'rbac-follow-owners.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject).filter(Boolean));
    // A custom controller's kind, followed with --follow-kinds (and its get granted, as the chart's followOwners.extraKinds does).
    await e.kc.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({ body: { metadata: { name: 'rollouts.argoproj.io' }, spec: {
      group: 'argoproj.io', scope: 'Namespaced', names: { plural: 'rollouts', singular: 'rollout', kind: 'Rollout' },
      versions: [{ name: 'v1alpha1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } } }],
    } } }).catch(() => undefined);
    const rbac = e.kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({ body: { metadata: { name: 'wlnames-rollouts' }, rules: [{ apiGroups: ['argoproj.io'], resources: ['rollouts'], verbs: ['get'] }] } }).catch(() => undefined);
    await rbac.createClusterRoleBinding({ body: { metadata: { name: 'wlnames-rollouts' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'wlnames-rollouts' },
      subjects: ['ownerrefs-agent', 'ownerrefs-webhook'].map((name) => ({ kind: 'ServiceAccount', name, namespace: 'ownerrefs-system' })) } }).catch(() => undefined);
    webhook = await startWebhook(e.kc, e.kubeletRoot, { args: [`--follow-kinds=${ROLLOUT}`] });
  }, 300_000);
  afterAll(async () => { await webhook?.remove(); }); // the shared API server: no registration left behind

  /** The pod of `selector` once the annotations say `truth` (the webhook, then the agent), and the row. */
  const row = async (name: string, selector: string, truth: string) => {
    const pod = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector })).items
      .find((p) => `${p.metadata?.annotations?.['ownerrefs.dev/workload-kind']} ${p.metadata?.annotations?.['ownerrefs.dev/workload-name']}` === truth), {
      describe: `${name}: the pod's annotations say ${truth}`, diagnostics: async () => JSON.stringify((await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector })).items.map((p) => [p.metadata?.ownerReferences, p.metadata?.annotations])),
    }) as V1Pod;
    const a = pod.metadata!.annotations!;
    const controller = pod.metadata!.ownerReferences!.find((o) => o.controller)!;
    rows.push({ row: name, ours: `${a['ownerrefs.dev/workload-kind']} ${a['ownerrefs.dev/workload-name']}`, parsing: parsed(controller), truth });
  };

  it('is right in every row where name parsing guesses', async () => {
    const apps = e.apps;
    const batch = e.kc.makeApiClient(BatchV1Api);
    // 1. A Deployment whose name itself ends like a pod-template hash.
    await apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'api-7d9f8c6b5' }, spec: { replicas: 1, selector: { matchLabels: { row: 'hashlike' } }, template: template({ row: 'hashlike' }) } } as never });
    await row('a Deployment whose name ends like a pod-template hash (api-7d9f8c6b5)', 'row=hashlike', 'Deployment api-7d9f8c6b5');
    // 2. A bare ReplicaSet, which no Deployment owns.
    await apps.createNamespacedReplicaSet({ namespace: e.ns, body: { metadata: { name: 'cache-5d4f8' }, spec: { replicas: 1, selector: { matchLabels: { row: 'bare' } }, template: template({ row: 'bare' }) } } as never });
    await row('a bare ReplicaSet (cache-5d4f8)', 'row=bare', 'ReplicaSet cache-5d4f8');
    // 3. A ReplicaSet adopted by a new Deployment after its own was deleted with --cascade=orphan.
    await apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'shop' }, spec: { replicas: 1, selector: { matchLabels: { row: 'adopted' } }, template: template({ row: 'adopted' }) } } as never });
    await row('(before) the ReplicaSet of Deployment shop', 'row=adopted', 'Deployment shop');
    rows.pop();
    await apps.deleteNamespacedDeployment({ name: 'shop', namespace: e.ns, propagationPolicy: 'Orphan' });
    // The delete returns before the garbage collector has removed shop from its ReplicaSet. Created
    // earlier, storefront finds that ReplicaSet controlled by another, makes its own, and the row
    // would show a ReplicaSet named for storefront instead of an adopted one.
    await waitFor(async () => (await apps.listNamespacedReplicaSet({ namespace: e.ns, labelSelector: 'row=adopted' })).items
      .find((rs) => rs.metadata?.name?.startsWith('shop-') && !rs.metadata.ownerReferences?.length), { describe: 'the ReplicaSet of shop orphaned' });
    await apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'storefront' }, spec: { replicas: 1, selector: { matchLabels: { row: 'adopted' } }, template: template({ row: 'adopted' }) } } as never });
    await row('a ReplicaSet of Deployment shop, adopted by Deployment storefront', 'row=adopted', 'Deployment storefront');
    expect(rows.at(-1)!.parsing).toBe('Deployment shop'); // its pod is the adopted ReplicaSet's, not one storefront made
    // 4. A StatefulSet (its pods name it directly: both are right).
    await apps.createNamespacedStatefulSet({ namespace: e.ns, body: { metadata: { name: 'db' }, spec: { serviceName: 'db', replicas: 1, selector: { matchLabels: { row: 'sts' } }, template: template({ row: 'sts' }) } } as never });
    await row('a StatefulSet (db)', 'row=sts', 'StatefulSet db');
    // 5. A CronJob's Job (both are right), and a Job whose name looks like a CronJob's.
    const cron = await batch.createNamespacedCronJob({ namespace: e.ns, body: { metadata: { name: 'nightly' }, spec: { schedule: '0 3 * * *', jobTemplate: { spec: { template: { metadata: { labels: { row: 'cron' } }, spec: { ...podSpec, restartPolicy: 'Never' } } } } } } as never });
    await batch.createNamespacedJob({ namespace: e.ns, body: { metadata: { name: 'nightly-29400000', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: cron.metadata!.uid!, controller: true }] },
      spec: { template: { metadata: { labels: { row: 'cron' } }, spec: { ...podSpec, restartPolicy: 'Never' } } } } as never });
    await row("a CronJob's Job (nightly-29400000)", 'row=cron', 'CronJob nightly');
    await batch.createNamespacedJob({ namespace: e.ns, body: { metadata: { name: 'migrate-20240101' }, spec: { template: { metadata: { labels: { row: 'job' } }, spec: { ...podSpec, restartPolicy: 'Never' } } } } as never });
    await row("a Job whose name looks like a CronJob's (migrate-20240101)", 'row=job', 'Job migrate-20240101');
    // 6. A custom controller's kind, followed with --follow-kinds: a Rollout that owns a ReplicaSet.
    const rollout = await e.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'argoproj.io', version: 'v1alpha1', namespace: e.ns, plural: 'rollouts',
      body: { apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout', metadata: { name: 'checkout' } } }) as { metadata: { uid: string } };
    await apps.createNamespacedReplicaSet({ namespace: e.ns, body: { metadata: { name: 'checkout-6c8d9f7b4', ownerReferences: [{ apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout', name: 'checkout', uid: rollout.metadata.uid, controller: true }] },
      spec: { replicas: 1, selector: { matchLabels: { row: 'rollout' } }, template: template({ row: 'rollout' }) } } as never });
    await row('a ReplicaSet of an Argo Rollout (followed with --follow-kinds)', 'row=rollout', 'Rollout checkout');

    for (const r of rows) expect({ row: r.row, ours: r.ours }).toEqual({ row: r.row, ours: r.truth });
    expect(rows.filter((r) => r.parsing !== r.truth).map((r) => r.row)).toHaveLength(4); // the guesses this table exists to show

    // The documentation's table is this one.
    const doc = readFileSync(path.join(ROOT, 'docs', 'usage', 'workload-identity.md'), 'utf8');
    const table = rows.map((r) => `| ${r.row} | ${r.truth} | ${r.ours}${r.ours === r.truth ? '' : ' (wrong)'} | ${r.parsing}${r.parsing === r.truth ? '' : ' (wrong)'} |`);
    expect(doc).toContain(['| Pods of | The workload | ownerrefs.dev/workload-kind and -name | Name parsing |', '|---|---|---|---|', ...table].join('\n'));
  });
});
