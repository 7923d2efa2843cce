// KEP-4753's own syntax, unchanged, on a real node: the API server calls the real webhook
// (TLS on loopback through clientConfig.url, with the caBundle the webhook put there
// itself), the real kubelet calls the agent's CSI driver, and the files and env are read
// from inside the containers. Bytes are checked against Go: encoding/json for the owners,
// the kubelet's own downwardAPI volume for every other item.

import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { KubernetesObjectApi, PatchStrategy, type KubernetesObject, type V1OwnerReference, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { checkSource } from '../../projections/downwardapi.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { buildOracle, goMarshal } from '../support/gooracle.ts';
import { kepSpec, workload, WORKLOAD_KINDS } from '../support/podspecs.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';
import type { OwnerReference } from '../../projections/index.ts';

const EXAMPLES = path.join(import.meta.dirname, '..', '..', 'examples', 'kep');
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const local = <T extends Obj>(o: T): T => {
  // The examples name image "busybox"; the node has no registry, only its imported image.
  for (const c of [...o.spec?.containers ?? [], ...o.spec?.template?.spec?.containers ?? []]) Object.assign(c, { image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent' });
  return o;
};
const example = (name: string) => local(parseYaml(readFileSync(path.join(EXAMPLES, name), 'utf8')) as Obj);
const owners = (refs: V1OwnerReference[] | undefined): OwnerReference[] => (refs ?? []).map((r) => ({ ...r }));

describe(CONTAINERS ? 'KEP-4753 syntax on a real node' : 'KEP-4753 syntax on a hollow node (no real node on this machine)', () => {
  const e = useRealNode('kep', {
    agentArgs: (node) => [`--csi-socket=${path.join(node.kubeletRoot, 'plugins', 'ownerrefs.dev', 'csi.sock')}`,
      `--registration-dir=${path.join(node.kubeletRoot, 'plugins_registry')}`],
  });
  let webhook: WebhookProcess;
  const objects = () => KubernetesObjectApi.makeApiClient(e.kc);
  beforeAll(async () => {
    buildOracle();
    webhook = await startWebhook(e.kc, e.node.workDir);
  }, 300_000);
  // Before the node and control plane go (after-hooks run last-registered first); the last
  // test leaves a restarted webhook, and a test process that ends does not take it along.
  afterAll(async () => { await webhook?.stop(); });

  const running = (name: string) => e.waitFor(async () => {
    const p = await e.core.readNamespacedPod({ name, namespace: e.ns });
    return p.status?.phase === 'Running' ? p : undefined;
  }, `pod ${name} Running`, 120_000);
  const runningWith = (selector: string) => e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector }))
    .items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp), `a Running pod ${selector}`, 120_000);
  /** The env value as the container sees it (on a hollow node: as the pod spec holds it). */
  const envOf = async (pod: V1Pod, name: string) => CONTAINERS
    ? e.exec(pod, ['sh', '-c', `printf %s "$${name}"`])
    : pod.spec!.containers[0]!.env!.find((v) => v.name === name)!.value!;
  const fileOf = (pod: V1Pod, file: string) => e.exec(pod, ['cat', `/etc/podinfo/${file}`]);

  it("the KEP's volume and env examples, applied as written (one controller): the file follows the owners, the env keeps them from creation", async () => {
    // The KEP's owner, made real so that the garbage collector keeps the pods: a DaemonSet of
    // that name, whose selector matches neither pod, so its controller soon releases them.
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name: 'an-owned-pod-1722852739' }, spec: {
      selector: { matchLabels: { app: 'kep-owner' } },
      template: { metadata: { labels: { app: 'kep-owner' } }, spec: { nodeSelector: { nowhere: 'true' }, containers: [{ name: 'c', image: IMAGES.busybox }] } },
    } } });
    const asWritten = (o: Obj) => {
      o.metadata.ownerReferences = [{ ...o.metadata.ownerReferences[0], uid: ds.metadata!.uid }];
      return o;
    };
    const volumePod = asWritten(example('volume-pod.yaml'));
    const envPod = asWritten(local(parseYaml(readFileSync(path.join(EXAMPLES, 'env-pod.yaml'), 'utf8')) as Obj));
    const created = owners(volumePod.metadata.ownerReferences);
    await e.core.createNamespacedPod({ namespace: e.ns, body: volumePod as V1Pod });
    await e.core.createNamespacedPod({ namespace: e.ns, body: envPod as V1Pod });
    const vp = await running(volumePod.metadata.name);
    expect(vp.spec!.volumes![0]!.csi).toMatchObject({ driver: 'ownerrefs.dev', readOnly: true });
    const ep = await running(envPod.metadata.name);
    // The env: the owners in the admission request, byte for byte what Go marshals.
    expect(await envOf(ep, 'OWNER_REFERENCES')).toBe(goMarshal(created));
    // The DaemonSet controller releases both pods (its selector does not match them):
    await e.waitFor(async () => ((await e.core.readNamespacedPod({ name: vp.metadata!.name!, namespace: e.ns })).metadata!.ownerReferences ?? []).length === 0 || undefined, 'the DaemonSet controller releases the pod');
    // the file follows, live; the env keeps the value from creation (the one documented difference).
    await e.waitFor(async () => (await fileOf(vp, 'ownerReferences')) === goMarshal([]) || undefined, 'the file, read in the container, says "items":[]');
    expect(await envOf(ep, 'OWNER_REFERENCES')).toBe(goMarshal(created));
    if (CONTAINERS) { // the KEP's own loop prints the file every 5 s
      await e.waitFor(async () => (await e.core.readNamespacedPodLog({ name: vp.metadata!.name!, namespace: e.ns })).includes(goMarshal([])) || undefined, "the KEP's loop prints the file");
    }
  });

  it('a DaemonSet written in KEP syntax: pods get env and file naming it, the file follows orphaning and adoption', async () => {
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: example('env-daemonset.yaml') as never });
    const stored = ds.spec!.template.spec!;
    expect(stored.volumes![0]!.csi?.driver).toBe('ownerrefs.dev');
    expect(stored.containers[0]!.env![0]!.valueFrom!.fieldRef!.fieldPath).toBe("metadata.annotations['ownerrefs.dev/owner-references']");
    const pod = await runningWith('app=kep-env-example');
    const mine = owners(pod.metadata!.ownerReferences);
    expect(mine).toEqual([expect.objectContaining({ kind: 'DaemonSet', name: 'kep-env-example', uid: ds.metadata!.uid })]);
    expect(await envOf(pod, 'OWNER_REFERENCES')).toBe(goMarshal(mine));
    expect(await fileOf(pod, 'ownerReferences')).toBe(goMarshal(mine));
    const created = new Date(pod.metadata!.creationTimestamp!).getTime();
    await e.waitFor(() => Date.now() >= created + 1_100 || undefined, 'a new second (the controller keeps the older pod)');
    const relabel = (app: string) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app } } } }, mergePatch);
    await relabel('elsewhere');
    await e.waitFor(async () => (await fileOf(pod, 'ownerReferences')) === goMarshal([]) || undefined, 'orphaned: the file says "items":[]');
    await relabel('kep-env-example');
    await e.waitFor(async () => (await fileOf(pod, 'ownerReferences')) === goMarshal(mine) || undefined, 'adopted again: the file names the DaemonSet');
    expect(await envOf(pod, 'OWNER_REFERENCES')).toBe(goMarshal(mine));
  });

  it("a Deployment in KEP syntax: each pod's env names its own ReplicaSet", async () => {
    const body = workload('Deployment', { ...kepSpec({ volume: false }), containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'],
      env: [{ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] }] });
    Object.assign(body.metadata as object, { namespace: e.ns });
    (body.spec as Obj).replicas = 2;
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: body as never });
    const pods = await e.waitFor(async () => {
      const l = (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=x' })).items.filter((p) => p.status?.phase === 'Running');
      return l.length === 2 ? l : undefined;
    }, 'two Running pods', 120_000);
    for (const p of pods) {
      const rs = owners(p.metadata!.ownerReferences);
      expect(rs).toEqual([expect.objectContaining({ kind: 'ReplicaSet', controller: true })]);
      expect(await envOf(p, 'OWNER_REFERENCES')).toBe(goMarshal(rs));
    }
  });

  it("every downward API item: the agent's bytes and modes equal the kubelet's own downwardAPI volume for the same pod", async () => {
    const items = [
      ['name', 'metadata.name'], ['namespace', 'metadata.namespace'], ['uid', 'metadata.uid'], ['labels', 'metadata.labels'],
      ['annotations', 'metadata.annotations'], ['one-label', "metadata.labels['app']"], ['one-annotation', "metadata.annotations['example.com/tricky']"],
      ['missing-label', "metadata.labels['absent']"],
    ].map(([p, f]) => ({ path: p!, fieldRef: { apiVersion: 'v1', fieldPath: f! } }));
    const resources = [
      { path: 'cpu/limit', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } },
      { path: 'cpu/request', resourceFieldRef: { containerName: 'app', resource: 'requests.cpu' } },
      { path: 'mem/limit', resourceFieldRef: { containerName: 'app', resource: 'limits.memory', divisor: '1Mi' } },
      { path: 'mem/request', resourceFieldRef: { containerName: 'app', resource: 'requests.memory', divisor: '1k' } },
      { path: 'mem/sidecar-limit', resourceFieldRef: { containerName: 'sidecar', resource: 'limits.memory' } }, // none set: node allocatable
      { path: 'storage', resourceFieldRef: { containerName: 'sidecar', resource: 'limits.ephemeral-storage', divisor: '1Gi' } },
      { path: 'private', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu' }, mode: 0o600 },
    ];
    const all = [...items, ...resources];
    const c = (name: string, res: Obj) => ({ name, image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'], resources: res,
      volumeMounts: [{ name: 'kep', mountPath: '/etc/kep' }, { name: 'kubelet', mountPath: '/etc/kubelet' }] });
    const pod = await e.core.createNamespacedPod({ namespace: e.ns, body: {
      metadata: { name: 'every-item', labels: { app: 'items', 'app.kubernetes.io/part-of': 'kep' },
        annotations: { 'example.com/tricky': 'quotes " \\ new\nline tab\t ünïcödé 🎉 nbsp\u00a0', 'example.com/plain': 'x' } },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [c('app', { limits: { cpu: '250m', memory: '64Mi' }, requests: { cpu: '100m', memory: '48Mi' } }), c('sidecar', {})],
        volumes: [
          { name: 'kep', downwardAPI: { defaultMode: 0o440, items: [{ path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }, ...all] } },
          { name: 'kubelet', downwardAPI: { defaultMode: 0o440, items: all } },
        ],
      },
    } as V1Pod });
    expect(pod.spec!.volumes![0]!.csi?.driver).toBe('ownerrefs.dev');
    expect(pod.spec!.volumes![1]!.downwardAPI).toBeDefined();
    await running('every-item');
    const volumes = path.join(e.node.kubeletRoot, 'pods', pod.metadata!.uid!, 'volumes');
    const ours = path.join(volumes, 'kubernetes.io~csi', 'kep', 'mount');
    const theirs = path.join(volumes, 'kubernetes.io~downward-api', 'kubelet');
    const read = (dir: string, p: string) => ({ mode: (statSync(path.join(dir, p)).mode & 0o777).toString(8), text: readFileSync(path.join(dir, p), 'utf8') });
    // The kubelet's copy of a pod carries two annotations of its own that the API object lacks,
    // kubernetes.io/config.seen and config.source: its annotations file lists them, ours cannot.
    const kubeletOnly = /^kubernetes\.io\/config\.(seen|source)=.*\n?/gm;
    const theirsRead = (p: string) => {
      const r = read(theirs, p);
      return p === 'annotations' ? { ...r, text: r.text.replace(kubeletOnly, '').replace(/\n$/, '') } : r;
    };
    expect(read(theirs, 'annotations').text).toMatch(/^kubernetes\.io\/config\.source="api"$/m);
    for (const { path: p } of all) expect({ item: p, ...read(ours, p) }).toEqual({ item: p, ...theirsRead(p) });
    expect(read(ours, 'ownerReferences')).toEqual({ mode: '440', text: goMarshal([]) });
    expect(readdirSync(ours).filter((n) => !n.startsWith('.')).sort()).toEqual(['annotations', 'cpu', 'labels', 'mem', 'missing-label', 'name', 'namespace',
      'one-annotation', 'one-label', 'ownerReferences', 'private', 'storage', 'uid']);
    if (CONTAINERS) {
      for (const p of ['labels', 'annotations', 'cpu/limit', 'mem/sidecar-limit', 'private']) {
        const kubelet = await e.exec(pod, ['cat', `/etc/kubelet/${p}`]);
        expect(await e.exec(pod, ['cat', `/etc/kep/${p}`])).toBe(p === 'annotations' ? kubelet.replace(kubeletOnly, '').replace(/\n$/, '') : kubelet);
      }
    }
    // Live: a label change reaches our volume on the watch event (the kubelet's takes a sync period).
    await e.core.patchNamespacedPod({ name: 'every-item', namespace: e.ns, body: { metadata: { labels: { tier: 'gold' } } } }, mergePatch);
    await e.waitFor(() => readFileSync(path.join(ours, 'labels'), 'utf8').includes('tier="gold"') || undefined, 'the labels file follows the label');
  });

  it('every template kind in KEP syntax is accepted and stored rewritten; a re-apply changes nothing (no rollout)', async () => {
    for (const kind of WORKLOAD_KINDS) {
      const body = workload(kind, kepSpec()) as KubernetesObject & Obj;
      body.metadata = { name: `dry-${kind.toLowerCase()}`, namespace: e.ns };
      const out = await objects().create(body, undefined, 'All') as Obj; // dry run: nothing runs, admission does
      const spec = kind === 'CronJob' ? out.spec.jobTemplate.spec.template.spec : kind === 'PodTemplate' ? out.template.spec : out.spec.template.spec;
      expect({ kind, driver: spec.volumes[1].csi?.driver, env: spec.containers[0].env[1].valueFrom?.fieldRef?.fieldPath })
        .toEqual({ kind, driver: 'ownerrefs.dev', env: "metadata.annotations['ownerrefs.dev/owner-references']" });
    }
    const d: Obj = { ...workload('Deployment', { ...kepSpec(), containers: [{ name: 'app', image: IMAGES.busybox, env: kepSpec().containers[0]!.env }] }), metadata: { name: 'reapplied', namespace: e.ns } };
    d.spec.replicas = 0;
    const apply = () => objects().patch(d as KubernetesObject, undefined, undefined, 'gitops', true, PatchStrategy.ServerSideApply) as Promise<Obj>;
    const first = await apply();
    const second = await apply();
    expect(second.metadata.generation).toBe(first.metadata.generation);
  });

  it('an ephemeral container in KEP syntax gets the literal too', async () => {
    const pod = await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'debuggee', ownerReferences: [] }, spec: {
      terminationGracePeriodSeconds: 1, containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'] }] } } });
    const dbg = { name: 'dbg', image: IMAGES.busybox, command: ['sleep', '60'], env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] };
    // What `kubectl debug` does: the latest pod with one more ephemeral container (retried: the scheduler and kubelet update it too).
    const out = await e.waitFor(async () => {
      const now = await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns });
      return e.core.replaceNamespacedPodEphemeralcontainers({ name: 'debuggee', namespace: e.ns, body: { ...now, spec: { ...now.spec!, ephemeralContainers: [dbg] } } })
        .catch((err: unknown) => { if (String(err).includes('409')) return undefined; throw err; });
    }, 'the ephemeral container added');
    expect(out.spec!.ephemeralContainers![0]!.env).toEqual([{ name: 'O', value: goMarshal([]) }]);
  });

  it('what cannot be served is denied with a message that says what to write instead', async () => {
    const deny = async (spec: Obj) => {
      const err = await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'refused' }, spec } as V1Pod }).then(() => undefined, (x: unknown) => x as { body?: string });
      return String(err?.body ?? err);
    };
    const c = [{ name: 'app', image: IMAGES.busybox }];
    expect(await deny({ containers: c, volumes: [{ name: 'v', projected: { sources: [{ serviceAccountToken: { path: 't' } },
      { downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } }] } }] }))
      .toMatch(/admission webhook \\"pods.ownerrefs.dev\\" denied the request: ownerrefs.dev cannot serve metadata.ownerReferences for Pod refused: spec.volumes\[0\].projected: a projected volume that mixes metadata.ownerReferences with serviceAccountToken.*Move the metadata.ownerReferences item into a volume of its own/);
    expect(await deny({ containers: c, volumes: [{ name: 'v', downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: 'metadata.ownerReferences' } },
      { path: '../escape', fieldRef: { fieldPath: 'metadata.name' } }] } }] })).toMatch(/items\[1\]\.path: must not contain '\.\.'/);
  });

  it('our validation of items agrees with the API server on every case of a plain downwardAPI volume', async () => {
    const cases: Obj[] = [
      { path: 'ok', fieldRef: { fieldPath: 'metadata.name' } }, { path: '/abs', fieldRef: { fieldPath: 'metadata.name' } },
      { path: 'a/../b', fieldRef: { fieldPath: 'metadata.name' } }, { path: '..x', fieldRef: { fieldPath: 'metadata.name' } },
      { path: 'ip', fieldRef: { fieldPath: 'status.podIP' } }, { path: 'n', fieldRef: { fieldPath: "metadata.name['x']" } },
      { path: 'l', fieldRef: { fieldPath: "metadata.labels['bad key']" } }, { path: 'a', fieldRef: { fieldPath: "metadata.annotations['Example.COM/Upper']" } },
      { path: 'c', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '2' } },
      { path: 'c', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1000m' } },
      { path: 'm', resourceFieldRef: { containerName: 'app', resource: 'limits.memory', divisor: '1024' } },
      { path: 'm', resourceFieldRef: { containerName: 'app', resource: 'limits.memory', divisor: '1Ki' } },
      { path: 'h', resourceFieldRef: { containerName: 'app', resource: 'limits.hugepages-2Mi' } },
      { path: 'g', resourceFieldRef: { containerName: 'app', resource: 'limits.nvidia.com/gpu' } },
      { path: 'r', resourceFieldRef: { resource: 'limits.cpu' } }, { path: 'x', mode: 0o1000, fieldRef: { fieldPath: 'metadata.name' } },
      { path: 'both', fieldRef: { fieldPath: 'metadata.name' }, resourceFieldRef: { containerName: 'app', resource: 'limits.cpu' } },
    ];
    for (const item of cases) {
      const server = await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: { metadata: { name: 'probe' }, spec: {
        containers: [{ name: 'app', image: IMAGES.busybox }], volumes: [{ name: 'v', downwardAPI: { items: [item] } }] } } as V1Pod })
        .then(() => 'accepted', () => 'refused');
      const ours = checkSource({ items: [item] }).length === 0 ? 'accepted' : 'refused';
      expect({ item, ours }).toEqual({ item, ours: server });
    }
  });

  it('only pods in the syntax wait on the webhook: stopped, it refuses them with the reason, and other pods are created as usual', async () => {
    const before = await webhook.metric('ownerrefs_webhook_reviews_total');
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'plain-1' }, spec: { containers: [{ name: 'app', image: IMAGES.busybox,
      env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }], volumes: [{ name: 'd', downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }] } } });
    expect(await webhook.metric('ownerrefs_webhook_reviews_total')).toBe(before); // matchConditions kept it away
    await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: { metadata: { name: 'kep-1' }, spec: kepSpec() } as V1Pod });
    expect(await webhook.metric('ownerrefs_webhook_reviews_total')).toBe(before + 1);

    await webhook.stop();
    const err = await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'kep-2' }, spec: kepSpec() } as V1Pod }).then(() => undefined, (x: unknown) => x as { body?: string });
    expect(String(err?.body)).toMatch(/failed calling webhook \\"pods.ownerrefs.dev\\"/);
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'plain-2' }, spec: { containers: [{ name: 'app', image: IMAGES.busybox }] } } });
    webhook = await webhook.restart();
    await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: { metadata: { name: 'kep-3' }, spec: kepSpec() } as V1Pod });
  });
});
