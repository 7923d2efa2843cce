// KEP-4753's own syntax, unchanged, on a real node: the API server calls the real webhook
// (TLS on loopback through clientConfig.url, with the caBundle the webhook put there itself),
// which points the syntax at the pod annotation ownerrefs.dev/owner-references and sets it;
// the agent keeps it current; the real kubelet renders volumes and env from it. Everything is
// read from inside the containers, and bytes are checked against Go's encoding/json.
//
// On a machine that cannot run a real node, only what needs no kubelet runs here (what the
// API server stores, the webhook's absence): the rest is skipped, saying so.

import path from 'node:path';
import { readFileSync } from 'node:fs';
import { KubernetesObjectApi, PatchStrategy, VersionApi, type KubernetesObject, type V1OwnerReference, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { mergePatch } from '../../localcluster/patch.ts';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { buildOracle, goMarshal } from '../support/gooracle.ts';
import { kepSpec, workload, WORKLOAD_KINDS } from '../support/podspecs.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';
import type { OwnerReference } from '../../projections/index.ts';

const EXAMPLES = path.join(import.meta.dirname, '..', '..', 'examples', 'kep');
const OWNERS = 'ownerrefs.dev/owner-references';
const READS_OWNERS = `metadata.annotations['${OWNERS}']`;
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const local = <T extends Obj>(o: T): T => {
  // The examples name image busybox:1.37; the node has no registry, only its imported image.
  for (const c of [...o.spec?.containers ?? [], ...o.spec?.template?.spec?.containers ?? []]) Object.assign(c, { image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent' });
  return o;
};
const example = (name: string) => local(parseYaml(readFileSync(path.join(EXAMPLES, name), 'utf8')) as Obj);
const owners = (refs: V1OwnerReference[] | undefined): OwnerReference[] => (refs ?? []).map((r) => ({ ...r }));
const sleeper = (over: Obj = {}) => ({ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'], ...over });

describe(CONTAINERS ? 'KEP-4753 syntax on a real node' : 'KEP-4753 syntax on a hollow node (no real node on this machine)', () => {
  const e = useRealNode('kep');
  let webhook: WebhookProcess;
  const objects = () => KubernetesObjectApi.makeApiClient(e.kc);
  beforeAll(async () => {
    buildOracle();
    webhook = await startWebhook(e.kc, e.node.workDir);
  }, 300_000);
  // Before the node and control plane go (after-hooks run last-registered first).
  afterAll(async () => { await webhook?.stop(); });

  const running = (name: string) => e.waitFor(async () => {
    const p = await e.core.readNamespacedPod({ name, namespace: e.ns });
    return p.status?.phase === 'Running' ? p : undefined;
  }, `pod ${name} Running`, 120_000);
  const runningWith = (selector: string) => e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector }))
    .items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp), `a Running pod ${selector}`, 120_000);
  const envOf = (pod: V1Pod, name: string, container?: string) => e.exec(pod, ['sh', '-c', `printf %s "$${name}"`], container);
  const fileOf = (pod: V1Pod, file: string, dir = '/etc/podinfo') => e.exec(pod, ['cat', `${dir}/${file}`]);
  const fileBecomes = (pod: V1Pod, want: string, what: string, dir?: string, file = 'ownerReferences') => e.waitFor(async () => (await fileOf(pod, file, dir)) === want || undefined, what);
  const relabel = (pod: V1Pod, labels: Record<string, string>) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels } } }, mergePatch);
  /** A DaemonSet's controller keeps the older of two pods by creation time at one-second resolution: let a second pass first. */
  const aSecondAfter = (pod: V1Pod) => e.waitFor(() => Date.now() >= new Date(pod.metadata!.creationTimestamp!).getTime() + 1_100 || undefined, 'a new second');
  /** A DaemonSet of `spec` (its pod template's spec), labelled app=NAME. */
  const daemonSet = (name: string, spec: Obj) => e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: {
    metadata: { name }, spec: { selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { terminationGracePeriodSeconds: 1, ...spec } } },
  } as never });

  it.runIf(CONTAINERS)("the KEP's volume and env examples, applied as written (a bare pod, then owned as the example's comment shows): the file follows the owners, the running container's env stays", async () => {
    const volumePod = example('volume-pod.yaml');
    const envPod = example('env-pod.yaml');
    const stored = await e.core.createNamespacedPod({ namespace: e.ns, body: volumePod as V1Pod });
    expect(stored.spec!.volumes![0]!.downwardAPI!.items![0]!.fieldRef!.fieldPath).toBe(READS_OWNERS);
    expect({ annotation: stored.metadata!.annotations![OWNERS] }).toEqual({ annotation: goMarshal([]) });
    await e.core.createNamespacedPod({ namespace: e.ns, body: envPod as V1Pod });
    const vp = await running(volumePod.metadata.name);
    const ep = await running(envPod.metadata.name);
    expect(await envOf(ep, 'OWNER_REFERENCES')).toBe(goMarshal([])); // at the first container start, byte for byte what Go marshals
    await fileBecomes(vp, goMarshal([]), 'the file, read in the container, says "items":[]');
    // What the example's comment does: a ConfigMap comes to own both pods. The agent sets the
    // annotation, the kubelet swaps the file; the running container's env stays (as in-tree).
    const cm = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'kep-owner' } } });
    const owner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'kep-owner', uid: cm.metadata!.uid! };
    for (const p of [vp, ep]) await e.core.patchNamespacedPod({ name: p.metadata!.name!, namespace: e.ns, body: { metadata: { ownerReferences: [owner] } } }, mergePatch);
    await fileBecomes(vp, goMarshal([owner]), 'the file names the ConfigMap');
    expect(await envOf(ep, 'OWNER_REFERENCES')).toBe(goMarshal([]));
    await e.waitFor(async () => (await e.core.readNamespacedPodLog({ name: vp.metadata!.name!, namespace: e.ns })).includes(goMarshal([owner])) || undefined, "the KEP's loop prints the file");
  });

  it.runIf(CONTAINERS)("the kubelet's own layout: ..data points at a timestamped directory, an inotify watcher on it fires on each orphan and adoption, and two items of one update are never seen half-swapped", async () => {
    // Two items from the same annotation: a reader that resolves ..data once must see them equal.
    // Its tally is renamed into place: `> /tmp/reads` would truncate it first, and a `cat` in
    // between reads nothing (once in a fresh-clone run).
    const reader = 'n=0; bad=0; while true; do d=$(readlink /etc/podinfo/..data); a=$(cat /etc/podinfo/$d/a 2>/dev/null) || continue; ' +
      'b=$(cat /etc/podinfo/$d/b 2>/dev/null) || continue; n=$((n+1)); [ "$a" = "$b" ] || bad=$((bad+1)); echo "$n $bad" > /tmp/reads.new; mv /tmp/reads.new /tmp/reads; done';
    const ds = await daemonSet('layout', {
      containers: [sleeper({ command: ['sh', '-c', 'watch-dir /etc/podinfo'], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] }),
        sleeper({ name: 'reader', command: ['sh', '-c', reader], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] })],
      volumes: [{ name: 'podinfo', downwardAPI: { items: ['a', 'b'].map((p) => ({ path: p, fieldRef: { fieldPath: 'metadata.ownerReferences' } })) } }],
    });
    const pod = await runningWith('app=layout');
    const mine = goMarshal(owners(pod.metadata!.ownerReferences));
    expect(await e.exec(pod, ['readlink', '/etc/podinfo/..data'])).toMatch(/^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+\n?$/);
    expect(await e.exec(pod, ['readlink', '/etc/podinfo/a'])).toBe('..data/a\n');
    await aSecondAfter(pod);
    const swaps = async () => (await e.core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: e.ns, container: 'app' })).split('\n').filter((l) => / moved_to \.\.data$/.test(l)).length;
    const before = await swaps();
    for (let round = 1; round <= 3; round++) {
      await relabel(pod, { app: 'elsewhere' });
      await fileBecomes(pod, goMarshal([]), `round ${round}: orphaned`, undefined, 'a');
      await relabel(pod, { app: 'layout' });
      await fileBecomes(pod, mine, `round ${round}: adopted again`, undefined, 'a');
    }
    await e.waitFor(async () => (await swaps()) >= before + 6 || undefined, 'the watcher saw ..data moved in once per orphan and once per adoption');
    const [reads, bad] = (await e.exec(pod, ['cat', '/tmp/reads'], 'reader')).trim().split(' ').map(Number);
    expect(reads).toBeGreaterThan(100);
    expect(bad).toBe(0);
    expect(ds.metadata!.name).toBe('layout');
  });

  it.runIf(CONTAINERS)('fsGroup with defaultMode 0440 lets a non-root container read the file; a projected volume mixing a token, a ConfigMap and the owners works', async () => {
    await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'settings' }, data: { mode: 'fast' } } });
    await daemonSet('nonroot', {
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 },
      containers: [sleeper({ volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }, { name: 'all', mountPath: '/etc/all' }] })],
      volumes: [
        { name: 'podinfo', downwardAPI: { defaultMode: 0o440, items: [{ path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } },
        { name: 'all', projected: { defaultMode: 0o440, sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 3600 } },
          { configMap: { name: 'settings' } },
          { downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } },
        ] } },
      ],
    });
    const pod = await runningWith('app=nonroot');
    const mine = goMarshal(owners(pod.metadata!.ownerReferences));
    expect(await e.exec(pod, ['id'])).toMatch(/^uid=1000 gid=1000 groups=1000,2000\n?$/);
    expect(await e.exec(pod, ['stat', '-c', '%a %g', '/etc/podinfo/..data/ownerReferences'])).toBe('440 2000\n');
    expect(await fileOf(pod, 'ownerReferences')).toBe(mine);
    expect(await fileOf(pod, 'ownerReferences', '/etc/all')).toBe(mine);
    expect(await fileOf(pod, 'mode', '/etc/all')).toBe('fast');
    expect((await fileOf(pod, 'token', '/etc/all')).split('.')).toHaveLength(3); // a JWT
    await aSecondAfter(pod);
    await relabel(pod, { app: 'elsewhere' });
    await fileBecomes(pod, goMarshal([]), 'the projected item follows the orphaning', '/etc/all');
  });

  it.runIf(CONTAINERS)('env: a container that restarts after its pod was orphaned starts with "items":[] (by its second restart: the first may start from the kubelet\'s last sync)', async () => {
    const loop = 'echo "OWNERS=$OWNER_REFERENCES"; while [ ! -e /tmp/restart ]; do sleep 0.2; done; exit 1';
    await daemonSet('restarts', { containers: [sleeper({ command: ['sh', '-c', loop], env: [{ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] })] });
    const pod = await runningWith('app=restarts');
    const mine = goMarshal(owners(pod.metadata!.ownerReferences));
    expect(await envOf(pod, 'OWNER_REFERENCES')).toBe(mine);
    await aSecondAfter(pod);
    await relabel(pod, { app: 'elsewhere' });
    await e.waitFor(async () => (await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns })).metadata!.annotations![OWNERS] === goMarshal([]) || undefined, 'the agent sets the annotation');
    expect(await envOf(pod, 'OWNER_REFERENCES')).toBe(mine); // the running container keeps its env, as in-tree
    // The kubelet starts the next container from its own copy of the pod: restart only once
    // that copy has the new value (its /pods, through the API server), or a busy kubelet may
    // restart it before its watch delivers the change, which no kubelet promises.
    await e.waitFor(async () => {
      const seen = await e.core.connectGetNodeProxyWithPath({ name: pod.spec!.nodeName!, path: 'pods' }) as unknown as { items: V1Pod[] }; // parsed already
      return seen.items.find((p) => p.metadata!.uid === pod.metadata!.uid)?.metadata?.annotations?.[OWNERS] === goMarshal([]) || undefined;
    }, "the kubelet's copy of the pod has the new annotation");
    // A restarted container starts from the pod as of the kubelet's last sync of it, and an
    // annotation's change alone may not have made one yet: 1.30's kubelet never syncs a pod for
    // it (unless a downwardAPI volume reads the annotation, as workload.test.ts's pods do), and
    // 1.36's may still be in a sync with the pod as it was. That restart can keep the old env;
    // the next one starts from the current pod. docs/INSTALL.md.
    const minor = Number((await e.kc.makeApiClient(VersionApi).getCode()).minor.replace(/\D.*$/, ''));
    const want = goMarshal([]);
    const restarts = async () => (await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns })).status?.containerStatuses?.[0]?.restartCount ?? 0;
    let env = '';
    for (let attempt = 1; attempt <= 2 && env !== want; attempt++) {
      const before = await restarts();
      // The container exits within 0.2 s of the touch, which may end the exec's stream in an
      // error: the restart count is what says it worked.
      await e.exec(pod, ['touch', '/tmp/restart']).catch(() => undefined);
      await e.waitFor(async () => (await restarts()) > before || undefined, `the container restarted (${attempt})`, 60_000);
      env = await e.waitFor(() => envOf(pod, 'OWNER_REFERENCES').catch(() => undefined), 'the new container answers');
      console.log(`Kubernetes 1.${minor}, restart ${attempt}: the container's env is ${env === want ? 'the new owners' : 'its first one'}`);
    }
    expect(env, 'a restarted container starts with "items":[] by its second restart').toBe(want);
  });

  it.runIf(CONTAINERS)('a pod created while no agent runs on its node starts with the right owners (the webhook set them)', async () => {
    await e.agent.stop();
    try {
      const cm = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'no-agent-owner' } } });
      const owner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'no-agent-owner', uid: cm.metadata!.uid! };
      await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'no-agent', ownerReferences: [owner] }, spec: {
        terminationGracePeriodSeconds: 1,
        containers: [sleeper({ env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] })],
        volumes: [{ name: 'podinfo', downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } }],
      } } as V1Pod });
      const pod = await running('no-agent');
      expect(await envOf(pod, 'O')).toBe(goMarshal([owner]));
      expect(await fileOf(pod, 'ownerReferences')).toBe(goMarshal([owner]));
    } finally {
      await e.restartAgent();
    }
  });

  it.runIf(CONTAINERS)("a Deployment in KEP syntax: each pod's env and file name its own ReplicaSet; a ConfigMap made from them goes with the workload", async () => {
    const body = workload('Deployment', { ...kepSpec(), containers: [sleeper({ env: [{ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }],
      volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] })] });
    Object.assign(body.metadata as object, { namespace: e.ns });
    (body.spec as Obj).replicas = 2;
    const d = await e.apps.createNamespacedDeployment({ namespace: e.ns, body: body as never });
    const pods = await e.waitFor(async () => {
      const l = (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=x' })).items.filter((p) => p.status?.phase === 'Running');
      return l.length === 2 ? l : undefined;
    }, 'two Running pods', 120_000);
    for (const p of pods) {
      const rs = owners(p.metadata!.ownerReferences);
      expect(rs).toEqual([expect.objectContaining({ kind: 'ReplicaSet', controller: true })]);
      expect(await envOf(p, 'OWNER_REFERENCES')).toBe(goMarshal(rs));
      expect(await fileOf(p, 'ownerReferences')).toBe(goMarshal(rs));
    }
    // The user story: the app reads its owners and owns what it creates by them (without
    // controller and blockOwnerDeletion, which would claim the owner's controller manages it).
    const items = (JSON.parse(await fileOf(pods[0]!, 'ownerReferences')) as { items: V1OwnerReference[] }).items
      .map(({ apiVersion, kind, name, uid }) => ({ apiVersion, kind, name, uid }));
    await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'made-by-the-pod', ownerReferences: items } } });
    await e.apps.deleteNamespacedDeployment({ name: d.metadata!.name!, namespace: e.ns, propagationPolicy: 'Background' });
    await e.waitFor(() => e.core.readNamespacedConfigMap({ name: 'made-by-the-pod', namespace: e.ns }).then(() => undefined, () => true), 'the garbage collector removes it with the ReplicaSet');
  });

  it('every template kind in KEP syntax is accepted and stored pointed at the annotation; a server-side re-apply changes nothing (no rollout)', async () => {
    for (const kind of WORKLOAD_KINDS) {
      const body = workload(kind, kepSpec()) as KubernetesObject & Obj;
      body.metadata = { name: `dry-${kind.toLowerCase()}`, namespace: e.ns };
      const out = await objects().create(body, undefined, 'All') as Obj; // dry run: nothing runs, admission does
      const spec = kind === 'CronJob' ? out.spec.jobTemplate.spec.template.spec : kind === 'PodTemplate' ? out.template.spec : out.spec.template.spec;
      expect({ kind, volume: spec.volumes[1].downwardAPI.items[0].fieldRef.fieldPath, env: spec.containers[0].env[1].valueFrom.fieldRef.fieldPath })
        .toEqual({ kind, volume: READS_OWNERS, env: READS_OWNERS });
    }
    const d: Obj = { ...workload('Deployment', { ...kepSpec(), containers: [{ name: 'app', image: IMAGES.busybox, env: kepSpec().containers[0]!.env }] }), metadata: { name: 'reapplied', namespace: e.ns } };
    d.spec.replicas = 0;
    const apply = () => objects().patch(d as KubernetesObject, undefined, undefined, 'gitops', true, PatchStrategy.ServerSideApply) as Promise<Obj>;
    const first = await apply();
    const second = await apply();
    expect(second.metadata.generation).toBe(first.metadata.generation);
  });

  it.runIf(CONTAINERS)('an ephemeral container in KEP syntax reads the annotation, which the agent sets for a pod that did not read it before', async () => {
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'debuggee' }, spec: { terminationGracePeriodSeconds: 1, containers: [sleeper()] } } });
    const pod = await running('debuggee');
    const dbg = { name: 'dbg', image: IMAGES.busybox, command: ['sleep', '60'], env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] };
    // What `kubectl debug` does: the latest pod with one more ephemeral container (retried: the kubelet updates it too).
    const out = await e.waitFor(async () => {
      const now = await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns });
      return e.core.replaceNamespacedPodEphemeralcontainers({ name: 'debuggee', namespace: e.ns, body: { ...now, spec: { ...now.spec!, ephemeralContainers: [dbg] } } })
        .catch((err: unknown) => { if (String(err).includes('409')) return undefined; throw err; });
    }, 'the ephemeral container added');
    expect(out.spec!.ephemeralContainers![0]!.env).toEqual([{ name: 'O', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: READS_OWNERS } } }]);
    await e.waitFor(async () => (await e.core.readNamespacedPod({ name: 'debuggee', namespace: e.ns })).metadata!.annotations?.[OWNERS] === goMarshal([]) || undefined, 'the agent sets the annotation');
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
