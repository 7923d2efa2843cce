// The workload's identity in env and files, read inside real containers on the real node:
// the webhook resolves each pod's controller chain at admission (so the first container start
// has the values), the agent keeps them current afterwards, and what cannot be resolved says
// so, never naming a guessed workload.

import path from 'node:path';
import { readFileSync } from 'node:fs';
import { BatchV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { apply } from '../../localcluster/agentproc.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { startFaultProxy, type FaultProxy } from '../support/proxy.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const KEYS = ['workload-kind', 'workload-name', 'workload-uid', 'controller-kind', 'controller-name', 'otel-resource-attributes'] as const;
const ENV = (k: string) => k.toUpperCase().replaceAll('-', '_');
const reads = KEYS.map((k) => ({ name: ENV(k), valueFrom: { fieldRef: { fieldPath: `metadata.annotations['ownerrefs.dev/${k}']` } } }));
/** A container that prints its env at start and waits; /tmp/restart ends it (the kubelet starts it again). */
const app = {
  name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', env: reads,
  command: ['sh', '-c', 'echo "started WORKLOAD=$WORKLOAD_KIND/$WORKLOAD_NAME"; while [ ! -e /tmp/restart ]; do sleep 0.2; done'],
  volumeMounts: [{ name: 'identity', mountPath: '/etc/identity' }],
};
const template = (labels: Record<string, string>) => ({ metadata: { labels }, spec: {
  terminationGracePeriodSeconds: 1, containers: [app],
  volumes: [{ name: 'identity', downwardAPI: { items: [{ path: 'workload-name', fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/workload-name']" } }] } }],
} });

describe.runIf(CONTAINERS)('the workload\'s identity on a real node', () => {
  const e = useRealNode('workload', { agentArgs: () => ['--owner-refresh-seconds=2'] });
  let webhook: WebhookProcess;
  let proxy: FaultProxy;
  const batch = () => e.kc.makeApiClient(BatchV1Api);
  beforeAll(async () => {
    await apply(e.kc, parseAllDocuments(readFileSync(path.join(ROOT, 'rbac-follow-owners.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject).filter(Boolean));
    // The webhook reaches the API server through a proxy the last test holds.
    proxy = await startFaultProxy(Number(new URL(e.kc.getCurrentCluster()!.server).port));
    webhook = await startWebhook(e.kc, e.node.workDir, { apiServer: `https://${proxy.address}` });
  }, 300_000);
  afterAll(async () => {
    await webhook?.stop();
    await proxy?.close();
  });

  const envOf = async (pod: V1Pod) => Object.fromEntries(await Promise.all(KEYS.map(async (k) => [k, await e.exec(pod, ['sh', '-c', `printf %s "$${ENV(k)}"`])] as const)));
  const runningWith = (selector: string) => e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector }))
    .items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp), `a Running pod ${selector}`, 120_000);

  it('a Deployment\'s, a StatefulSet\'s, a DaemonSet\'s and a CronJob\'s pod start with their workload in env', async () => {
    const d = await e.apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'web' }, spec: { selector: { matchLabels: { app: 'web' } }, template: template({ app: 'web' }) } } as never });
    const s = await e.apps.createNamespacedStatefulSet({ namespace: e.ns, body: { metadata: { name: 'db' }, spec: { serviceName: 'db', selector: { matchLabels: { app: 'db' } }, template: template({ app: 'db' }) } } as never });
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name: 'agent' }, spec: { selector: { matchLabels: { app: 'agent' } }, template: template({ app: 'agent' }) } } as never });
    const cron = await batch().createNamespacedCronJob({ namespace: e.ns, body: { metadata: { name: 'nightly' }, spec: { schedule: '0 3 * * *',
      jobTemplate: { spec: { template: { ...template({ app: 'nightly' }), spec: { ...template({}).spec, restartPolicy: 'Never' } } } } } } as never });
    // What `kubectl create job --from=cronjob/nightly` makes: a Job its CronJob controls.
    const job = await batch().createNamespacedJob({ namespace: e.ns, body: { metadata: { name: 'nightly-manual', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: cron.metadata!.uid!, controller: true }] },
      spec: cron.spec!.jobTemplate.spec! } as never });
    const cases = [
      { selector: 'app=web', kind: 'Deployment', name: 'web', uid: d.metadata!.uid!, controller: 'ReplicaSet', otel: /^k8s\.replicaset\.name=web-\w+,k8s\.replicaset\.uid=[-\w]+,k8s\.deployment\.name=web,k8s\.deployment\.uid=/ },
      { selector: 'app=db', kind: 'StatefulSet', name: 'db', uid: s.metadata!.uid!, controller: 'StatefulSet', otel: /^k8s\.statefulset\.name=db,k8s\.statefulset\.uid=[-\w]+$/ },
      { selector: 'app=agent', kind: 'DaemonSet', name: 'agent', uid: ds.metadata!.uid!, controller: 'DaemonSet', otel: /^k8s\.daemonset\.name=agent,k8s\.daemonset\.uid=[-\w]+$/ },
      { selector: 'app=nightly', kind: 'CronJob', name: 'nightly', uid: cron.metadata!.uid!, controller: 'Job', otel: new RegExp(`^k8s\\.job\\.name=nightly-manual,k8s\\.job\\.uid=${job.metadata!.uid},k8s\\.cronjob\\.name=nightly,k8s\\.cronjob\\.uid=`) },
    ];
    for (const c of cases) {
      const pod = await runningWith(c.selector);
      const env = await envOf(pod);
      expect(env).toMatchObject({ 'workload-kind': c.kind, 'workload-name': c.name, 'workload-uid': c.uid, 'controller-kind': c.controller });
      expect(env['otel-resource-attributes']).toMatch(c.otel);
      expect(await e.exec(pod, ['cat', '/etc/identity/workload-name'])).toBe(c.name);
      // The first container start had them: its first line of output.
      expect((await e.core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: e.ns })).split('\n')[0]).toBe(`started WORKLOAD=${c.kind}/${c.name}`);
    }
  });

  it('a Deployment deleted with --cascade=orphan, its ReplicaSet adopted by a new one: the file follows within the refresh bound, the env at the next container start', async () => {
    const pod = await runningWith('app=web');
    const rsName = pod.metadata!.ownerReferences![0]!.name;
    await e.apps.deleteNamespacedDeployment({ name: 'web', namespace: e.ns, propagationPolicy: 'Orphan' });
    const file = () => e.exec(pod, ['cat', '/etc/identity/workload-name']);
    await e.waitFor(async () => (await file()) === rsName || undefined, 'orphaned: the ReplicaSet is the workload', 30_000);
    expect((await envOf(pod))['workload-name']).toBe('web'); // the running container keeps its env, as in-tree
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'web-v2' }, spec: { selector: { matchLabels: { app: 'web' } }, template: template({ app: 'web' }) } } as never });
    await e.waitFor(async () => (await file()) === 'web-v2' || undefined, 'adopted: the new Deployment is the workload', 60_000);
    await e.exec(pod, ['touch', '/tmp/restart']);
    await e.waitFor(async () => (await envOf(pod).catch(() => undefined))?.['workload-name'] === 'web-v2' || undefined, 'the restarted container starts with the new Deployment', 60_000);
  });

  it('an owner that does not exist, and a kind that is not followed, give the documented values', async () => {
    const create = async (owner: object) => (await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: {
      metadata: { generateName: 'unresolved-', ownerReferences: [owner] }, spec: { containers: [{ ...app, volumeMounts: [] }] } } as V1Pod })).metadata!.annotations!;
    expect(await create({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'gone', uid: '00000000-0000-4000-8000-00000000dead', controller: true })).toMatchObject({
      'ownerrefs.dev/workload-kind': '(unresolved: NotFound)', 'ownerrefs.dev/workload-name': '(unresolved: NotFound)', 'ownerrefs.dev/controller-name': 'gone',
      'ownerrefs.dev/otel-resource-attributes': 'k8s.replicaset.name=gone,k8s.replicaset.uid=00000000-0000-4000-8000-00000000dead',
    });
    expect(await create({ apiVersion: 'example.com/v1', kind: 'Widget', name: 'w', uid: '00000000-0000-4000-8000-0000000000aa', controller: true })).toMatchObject({
      'ownerrefs.dev/workload-name': '(unresolved: KindNotFollowed)', 'ownerrefs.dev/controller-kind': 'Widget', 'ownerrefs.dev/otel-resource-attributes': '',
    });
  });

  // Only the webhook and the agent write ownerrefs.dev/ annotations: a pod's author, or a
  // controller's template, that writes one gets it removed at creation, whatever the pod reads.
  it('a pod created carrying our annotations it does not read, by its author or from a controller\'s template, is stored without them', async () => {
    const forged = { 'ownerrefs.dev/workload-name': 'payments', 'ownerrefs.dev/workload-kind': 'Deployment', 'ownerrefs.dev/otel-resource-attributes': 'k8s.deployment.name=payments', keep: 'me' };
    const plain = { containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'] }], terminationGracePeriodSeconds: 1 };
    const stored = await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: { metadata: { name: 'claims', annotations: forged }, spec: plain } as never });
    expect(stored.metadata?.annotations).toEqual({ keep: 'me' });
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'claimer' }, spec: { replicas: 1, selector: { matchLabels: { app: 'claimer' } },
      template: { metadata: { labels: { app: 'claimer' }, annotations: forged }, spec: plain } } } as never });
    const pod = await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=claimer' })).items[0], 'the Deployment\'s pod', 60_000);
    expect(pod.metadata?.annotations).toEqual({ keep: 'me' });
  });

  it('with its owner reads answering nothing, the webhook still admits within its budget, saying Pending; the agent fills the value in', async () => {
    // An owner the webhook has not read yet: a Deployment owning a pod directly (its controller leaves such pods alone).
    const d = await e.apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'owner-of-one' }, spec: { replicas: 0, selector: { matchLabels: { app: 'none' } }, template: template({ app: 'none' }) } } as never });
    proxy.cut();
    proxy.hold(); // every new connection of the webhook's to the API server is held, never answered
    try {
      const t0 = performance.now();
      const pod = await e.core.createNamespacedPod({ namespace: e.ns, body: {
        metadata: { name: 'slow-owner', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'owner-of-one', uid: d.metadata!.uid!, controller: true }] },
        spec: { terminationGracePeriodSeconds: 1, containers: [{ ...app, volumeMounts: [] }] } } as V1Pod });
      // Well within the API server's 5 s for the webhook: the budget (1 s) for owner reads, then Pending.
      expect(performance.now() - t0).toBeLessThan(4_000);
      expect(pod.metadata!.annotations).toMatchObject({ 'ownerrefs.dev/workload-name': '(unresolved: Pending)', 'ownerrefs.dev/controller-name': 'owner-of-one' });
      await e.waitFor(async () => (await e.core.readNamespacedPod({ name: 'slow-owner', namespace: e.ns })).metadata!.annotations!['ownerrefs.dev/workload-name'] === 'owner-of-one' || undefined,
        'the agent reads the owner and sets the workload');
    } finally {
      proxy.release();
    }
  });
});
