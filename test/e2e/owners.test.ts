// Beyond the KEP, against the real Deployment, ReplicaSet, Job, CronJob and garbage
// collector controllers: the controller chain and the workload kept live (a rollout, an
// orphaning delete and a re-adoption), what it costs the API server (counted by the API
// server itself), and the Node as an owner that outlives the DaemonSet.
// A control plane of this file's own: the node label that turns following on must not
// reach the other files' agents.

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { BatchV1Api, KubernetesObjectApi, type KubernetesObject, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { apply } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { apiServerMetrics, seriesSum } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';

const REFRESH_S = 2;
const ROOT = path.join(import.meta.dirname, '..', '..');
type Chain = { items: { kind: string; name: string; uid: string }[]; end: { reason: string; message: string } };

function deployment(name: string, replicas = 1): V1Deployment {
  const labels = { app: name };
  return { metadata: { name }, spec: { replicas, selector: { matchLabels: labels }, template: {
    metadata: { labels, annotations: { 'ownerrefs.dev/volume': 'podinfo' } },
    spec: { terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] },
  } } };
}

describe('following owners (controllerChain, workloadOwnerReferences) and the Node as owner', () => {
  const e = useE2E('owners', { privateControlPlane: 'owners-node', agentArgs: [`--owner-refresh-seconds=${REFRESH_S}`] });
  const chainOf = (pod: V1Pod) => JSON.parse(e.file(pod, 'controllerChain')!) as Chain;
  const workloadOf = (pod: V1Pod) => JSON.parse(e.file(pod, 'workloadOwnerReferences') ?? 'null') as { kind: string; name: string; uid: string }[] | null;
  const podsOf = async (selector: string, n = 1) => waitFor(async () => {
    const l = (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector })).items.filter((p) => !p.metadata?.deletionTimestamp);
    return l.length === n ? l : undefined;
  }, { describe: `${n} pods ${selector}` });
  beforeAll(async () => {
    const rbac = parseAllDocuments(readFileSync(path.join(ROOT, 'rbac-follow-owners.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject);
    await apply(e.kc, rbac);
    await e.core.patchNode({ name: e.nodeName, body: { metadata: { labels: { 'ownerrefs.dev/follow-owners': 'true' } } } }, mergePatch);
    await waitFor(() => e.agent.lines.some((l) => l.msg === 'node settings changed' && (l.settings as { followOwners?: boolean }).followOwners === true) || undefined,
      { describe: 'the agent follows owners' });
  });

  it("a Deployment's pods: the chain is ReplicaSet then Deployment, the workload the Deployment, through a rollout", async () => {
    const d = await e.apps.createNamespacedDeployment({ namespace: e.ns, body: deployment('web') });
    const [pod] = await podsOf('app=web');
    await e.waitForFile(pod!, (t) => t.includes('"Deployment"'), 'the workload file names the Deployment', 'workloadOwnerReferences');
    const c = chainOf(pod!);
    expect({ kinds: c.items.map((i) => i.kind), end: c.end.reason, top: c.items[1]!.uid }).toEqual({ kinds: ['ReplicaSet', 'Deployment'], end: 'Top', top: d.metadata!.uid });
    expect(workloadOf(pod!)).toEqual([{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: d.metadata!.uid }]);
    // A rollout: a new ReplicaSet, a new pod; the top is still the Deployment.
    await e.apps.patchNamespacedDeployment({ name: 'web', namespace: e.ns, body: { spec: { template: { metadata: { labels: { app: 'web', rev: '2' } } } } } }, mergePatch);
    const [next] = await podsOf('app=web,rev=2');
    await e.waitForFile(next!, (t) => t.includes('"Deployment"'), 'the new pod names the Deployment', 'workloadOwnerReferences');
    expect(chainOf(next!).items[0]!.uid).not.toBe(c.items[0]!.uid);
    expect(workloadOf(next!)![0]!.uid).toBe(d.metadata!.uid);
  });

  it('delete --cascade=orphan: the top moves to the ReplicaSet within the bound; a new Deployment adopting it becomes the top', async () => {
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: deployment('adopt') });
    const [pod] = await podsOf('app=adopt');
    await e.waitForFile(pod!, (t) => t.includes('"Deployment"'), 'the Deployment on top', 'workloadOwnerReferences');
    await e.apps.deleteNamespacedDeployment({ name: 'adopt', namespace: e.ns, propagationPolicy: 'Orphan' });
    const rs = chainOf(pod!).items[0]!;
    await e.waitForFile(pod!, (t) => t.includes('"ReplicaSet"') && !t.includes('"Deployment"'), 'the orphaned ReplicaSet on top', 'workloadOwnerReferences');
    expect(workloadOf(pod!)).toEqual([{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: rs.name, uid: rs.uid }]);
    const again = await e.apps.createNamespacedDeployment({ namespace: e.ns, body: deployment('adopt') });
    await e.waitForFile(pod!, (t) => t.includes(again.metadata!.uid!), 'the adopting Deployment on top', 'workloadOwnerReferences');
    expect(chainOf(pod!).items.map((i) => i.uid)).toEqual([rs.uid, again.metadata!.uid]); // the same pod, the same ReplicaSet
  });

  it("a CronJob's pod: the chain is Job then CronJob", async () => {
    const batch = e.kc.makeApiClient(BatchV1Api);
    const template = { spec: { template: { metadata: { labels: { app: 'nightly' }, annotations: { 'ownerrefs.dev/volume': 'podinfo' } }, spec: {
      restartPolicy: 'Never', containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] } } } };
    const cj = await batch.createNamespacedCronJob({ namespace: e.ns, body: { metadata: { name: 'nightly' }, spec: { schedule: '0 0 1 1 *', suspend: true, jobTemplate: template } } });
    // What `kubectl create job --from=cronjob/nightly` makes: a Job the CronJob controls.
    const job = await batch.createNamespacedJob({ namespace: e.ns, body: { metadata: { name: 'nightly-manual', ownerReferences: [
      { apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: cj.metadata!.uid!, controller: true, blockOwnerDeletion: true }] }, spec: template.spec } });
    const [pod] = await podsOf('app=nightly');
    await e.waitForFile(pod!, (t) => t.includes('"CronJob"'), 'the CronJob on top', 'workloadOwnerReferences');
    expect(chainOf(pod!).items.map((i) => [i.kind, i.uid])).toEqual([['Job', job.metadata!.uid], ['CronJob', cj.metadata!.uid]]);
  });

  it('a bare pod: no controller, and no workload', async () => {
    const pod = await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'bare', annotations: { 'ownerrefs.dev/volume': 'podinfo' } },
      spec: { nodeName: e.nodeName, containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] } } });
    await e.waitForFile(pod, (t) => t.includes('"NoController"'), 'the chain says NoController', 'controllerChain');
    expect(e.file(pod, 'workloadOwnerReferences')).toBe('[]');
  });

  it('costs one read per owner on the node, however many pods share it: counted by the agent and by the API server', async () => {
    const reads = async (kind: string) => e.agent.metric('ownerrefs_owner_reads_total', `kind="${kind}",code="ok",why="new"`);
    const [rs0, dep0] = [await reads('ReplicaSet'), await reads('Deployment')];
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: deployment('many', 12) });
    const pods = await podsOf('app=many', 12);
    for (const p of pods) await e.waitForFile(p, (t) => t.includes('"Deployment"'), `${p.metadata!.name} names the Deployment`, 'workloadOwnerReferences');
    expect({ rs: (await reads('ReplicaSet')) - rs0, dep: (await reads('Deployment')) - dep0 }).toEqual({ rs: 1, dep: 1 });
    // The API server's own count of GETs on replicasets (only the agent GETs them; the
    // controllers list and watch) equals the agent's count of its reads, first and refresh.
    const gets = seriesSum(await apiServerMetrics(e.cp!.kubeconfigPath), 'apiserver_request_total', 'resource="replicasets"', 'verb="GET"');
    const agentAll = await e.agent.metric('ownerrefs_owner_reads_total', 'kind="ReplicaSet"');
    expect(gets).toBeGreaterThan(0);
    // Read between the agent's two scrapes: the API server counts a read the agent may not have counted yet.
    expect(Math.abs(gets - agentAll)).toBeLessThanOrEqual(2);
  });

  it('an agent restart leaves the chain and workload files in place while it reads the owners again: not one is rewritten', async () => {
    const pods = [...await podsOf('app=web,rev=2'), ...await podsOf('app=many', 12)];
    const dir = (p: V1Pod) => e.kubelet.volumeDir(p.metadata!.uid!, 'podinfo');
    const inodes = () => pods.map((p) => ['controllerChain', 'workloadOwnerReferences'].map((n) => statSync(path.join(dir(p), n)).ino).join(','));
    const before = inodes();
    const workload = pods.map((p) => e.file(p, 'workloadOwnerReferences'));
    expect(workload.every((w) => w?.includes('"Deployment"'))).toBe(true);
    await e.agent.stop();
    await e.restartAgent();
    await waitFor(async () => (await e.agent.metric('ownerrefs_owner_reads_total')) >= 2 || undefined, { describe: 'the owners read again' });
    await new Promise((r) => setTimeout(r, 500));
    expect(inodes()).toEqual(before);
    expect(pods.map((p) => e.file(p, 'workloadOwnerReferences'))).toEqual(workload);
  });

  it('without rbac-follow-owners.yaml: a known workload stays at the next read (an error never blanks it), a new pod\'s chain ends Forbidden, and the Node gets a Warning Event', async () => {
    const objects = KubernetesObjectApi.makeApiClient(e.kc);
    const [known] = await podsOf('app=web,rev=2');
    const [chainBefore, workloadBefore] = [e.file(known!, 'controllerChain'), e.file(known!, 'workloadOwnerReferences')];
    const readsBefore = await e.agent.metric('ownerrefs_owner_reads_total', 'code="403"');
    await objects.delete({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'ownerrefs-agent-follow-owners' } });
    await waitFor(async () => (await e.agent.metric('ownerrefs_owner_reads_total', 'code="403"')) > readsBefore || undefined, { describe: 'a refresh read refused' });
    expect([e.file(known!, 'controllerChain'), e.file(known!, 'workloadOwnerReferences')]).toEqual([chainBefore, workloadBefore]);
    // A pod whose owner was never read: nothing in place to keep, so the chain says why it stops.
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: deployment('unread') });
    const [pod] = await podsOf('app=unread');
    await e.waitForFile(pod!, (t) => t.includes('"Forbidden"'), 'the chain ends Forbidden', 'controllerChain');
    expect(chainOf(pod!).end.message).toMatch(/rbac-follow-owners.yaml/);
    await e.waitForFile(pod!, (t) => t === '[]', 'the workload unknown', 'workloadOwnerReferences');
    const ev = await waitFor(async () => (await e.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${e.nodeName}` }))
      .items.find((x) => x.reason === 'OwnerRefsFollowForbidden'), { describe: 'a Warning Event on the Node' });
    expect(ev.message).toMatch(/^following (ReplicaSet|Deployment|Job|CronJob) owners: the agent may not get \w+\.(apps|batch): apply rbac-follow-owners.yaml/);
  });

  it('the user story extended: an object owned by the Node outlives the DaemonSet and goes with the Node', async () => {
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name: 'node-agent' }, spec: {
      selector: { matchLabels: { app: 'node-agent' } },
      template: { metadata: { labels: { app: 'node-agent' }, annotations: { 'ownerrefs.dev/volume': 'podinfo' } },
        spec: { tolerations: [{ operator: 'Exists' }], containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] } },
    } } });
    const [pod] = await podsOf('app=node-agent');
    const node = await e.core.readNode({ name: e.nodeName });
    const text = await e.waitForFile(pod!, (t) => t.includes(node.metadata!.uid!), 'the Node file', 'nodeOwnerReferences');
    expect(text).toBe(`[{"apiVersion":"v1","kind":"Node","name":"${e.nodeName}","uid":"${node.metadata!.uid}"}]`);
    // What the pod would create with that list (the agent's pods cannot create here: the test does, with the pod's file).
    await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'per-node-state', ownerReferences: JSON.parse(text) }, data: { seen: 'yes' } } });
    await e.apps.deleteNamespacedDaemonSet({ name: 'node-agent', namespace: e.ns });
    await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=node-agent' })).items.length === 0 || undefined,
      { describe: 'the DaemonSet and its pod gone' });
    expect(ds.metadata!.uid).toBeDefined();
    expect((await e.core.readNamespacedConfigMap({ name: 'per-node-state', namespace: e.ns })).data).toEqual({ seen: 'yes' }); // outlived the DaemonSet
    await e.core.deleteNode({ name: e.nodeName });
    await waitFor(async () => e.core.readNamespacedConfigMap({ name: 'per-node-state', namespace: e.ns }).then(() => undefined, () => true),
      { describe: 'the garbage collector collects it with the Node', timeoutMs: 60_000 });
  });

});
