// Upgrade, rollback and uninstall on the real node, with `helm` as docs/OPERATIONS.md says
// to run it. Every pod's container watches its file throughout: it must never read it
// missing or empty. The previous version is built from its commit (git archive): its image
// and its chart. Pods of every kind run under it: an emptyDir-annotation DaemonSet, a CSI
// Deployment, and Deployment and DaemonSet templates in the KEP's syntax (which that
// version's webhook rewrote into CSI volumes). Then `helm upgrade` to this version, `helm
// rollback`, and the documented uninstall, then an install again.
//
// The webhook runs as the chart runs it: two replicas on the node's bridge behind their
// Service, which the API server calls at a ready replica's IP (the control plane's
// aggregator routing stands in for kube-proxy). While each rollout runs, pods in the KEP's
// syntax are created (dry run) in several loops: every one must be admitted and rewritten,
// by one version or the other; the only refusals allowed are calls that a stopping replica
// of the previous version dropped (it stopped at once at SIGTERM; this version drains).

import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { AdmissionregistrationV1Api, PolicyV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mergePatch } from '../../localcluster/patch.ts';
import { freePort } from '../../localcluster/webhookproc.ts';
import { CHART, helmBin } from '../../scripts/gen-manifests.ts';
import { items } from '../support/e2e.ts';
import { helm, readyAgent, type Rendering } from '../support/installed.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';
import { policyName } from '../../agent/admission/policy/policy.ts';
import { GATED_LABEL } from '../../projections/names.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..', '..');
/** The last version before the kubelet rendered the KEP's syntax (CSI volumes and env literals instead). */
export const PREVIOUS = '090ddabf89fbdba27d81454b41e9dc9e9547d057';
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
/**
 * Each pod's container: once its file is there, records every tenth of a second in which it is
 * missing or empty in /tmp/blank (never, through an upgrade and a rollback).
 */
const WATCH_BLANK = 'f=/etc/podinfo/ownerReferences; until [ -s $f ]; do sleep 0.1; done; while true; do [ -s $f ] || date >> /tmp/blank; sleep 0.1; done';

describe.runIf(CONTAINERS)('upgrade, rollback and uninstall on a real node', () => {
  const e = useRealNode('life', { objects: false });
  let previous: string;
  let prevRender: Rendering;
  let thisRender: Rendering;
  const pods: Record<string, V1Pod> = {};
  const generations: Record<string, number> = {};

  /** The image of `root`'s Dockerfile, tagged `tag`, imported into the node. */
  const image = async (root: string, tag: string) => {
    const archive = (await run('bash', [path.join(root, 'localcluster', 'image', 'build.sh')], { maxBuffer: 1 << 24,
      env: { ...process.env, OWNERREFS_IMAGE: `localhost/ownerrefs/ownerrefs-agent:${tag}` } })).stdout.trim().split('\n').pop()!;
    await e.node.importImage!(archive);
  };
  const file = async (pod: V1Pod, dir: string) => e.exec(pod, ['cat', `${dir}/ownerReferences`]).catch(() => '');
  const namesIn = async (pod: V1Pod, dir: string) => { const t = await file(pod, dir); return t ? items(t).map((i) => i.name) : undefined; };
  const settle = (pod: V1Pod, dir: string, want: string[], what: string) =>
    e.waitFor(async () => JSON.stringify(await namesIn(pod, dir)) === JSON.stringify(want) || undefined, `${pod.metadata!.name} ${dir}: ${what}`, 90_000);
  const running = (selector: string, not: string[] = []) => e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: selector }))
    .items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp && !not.includes(p.metadata!.uid!)), `a Running pod ${selector}`, 150_000);
  /**
   * Owned by ConfigMap `a` or `b`: switching owners exercises every path (files, CSI targets,
   * annotations). Relabelled too, so its ReplicaSet does not adopt it back.
   */
  const own = (pod: V1Pod, owner: { name: string; uid: string }) => e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns,
    body: { metadata: { labels: { app: `${pod.metadata!.labels!.app!.replace(/-released$/, '')}-released` },
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.name, uid: owner.uid }] } } }, mergePatch);
  let owners: { name: string; uid: string }[];

  beforeAll(async () => {
    execFileSync('mount', ['--make-rshared', '/']);
    // The previous version's tree, with this checkout's node_modules (the same dependencies).
    previous = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-previous-')); // its image and chart (a rollback uses the release Helm stored)
    // A shallow clone lacks the commit: fetch it alone from where the clone came from.
    const has = spawnSync('git', ['-C', ROOT, 'cat-file', '-e', `${PREVIOUS}^{commit}`]).status === 0;
    const fetched = has || spawnSync('git', ['-C', ROOT, 'fetch', '--quiet', '--depth=1', 'origin', PREVIOUS], { stdio: 'inherit' }).status === 0;
    if (!fetched) throw new Error(`the previous version's commit ${PREVIOUS} is not in this clone, and fetching it from origin failed: clone with its history (not --depth)`);
    execFileSync('sh', ['-c', `git -C ${ROOT} archive ${PREVIOUS} | tar -x -C ${previous}`]);
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(previous, 'node_modules'));
    mkdirSync(path.join(previous, 'bench', 'results', 'tmp'), { recursive: true });
    await image(previous, 'previous');
    await image(ROOT, 'dev');
    const port = await freePort();
    prevRender = { helm: helmBin(), chart: path.join(previous, 'charts', 'ownerrefs-agent'), image: { repository: 'localhost/ownerrefs/ownerrefs-agent', tag: 'previous' }, port };
    thisRender = { helm: helmBin(), chart: CHART, image: { repository: 'localhost/ownerrefs/ownerrefs-agent', tag: 'dev' }, port };
    owners = await Promise.all(['owner-a', 'owner-b'].map(async (name) => ({ name, uid: (await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name } } })).metadata!.uid! })));
  }, 1_200_000);
  afterAll(() => { if (previous) rmSync(previous, { recursive: true, force: true }); });

  /** The webhook's Deployment rolled to `tag`: its two replicas of that image Ready, and no other pod of it left. */
  const webhookOn = (tag: string) => e.waitFor(async () => {
    const ws = (await e.core.listNamespacedPod({ namespace: 'ownerrefs-system', labelSelector: 'app.kubernetes.io/name=ownerrefs-webhook' })).items;
    return ws.length === 2 && ws.every((p) => p.spec!.containers[0]!.image!.endsWith(`:${tag}`) && !p.metadata!.deletionTimestamp
      && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ? ws : undefined;
  }, `the webhook's two replicas Ready on ${tag}, and no other`, 180_000);

  /**
   * Creates pods in the KEP's syntax (dry run: nothing is kept) until stopped, in `loops`
   * loops each pausing `pauseMs` between answers; each answer is the form the webhook
   * rewrote it into (the previous version's CSI volume, this version's annotation) or the
   * error. Only objects in the syntax wait on the webhook.
   */
  const probeAdmission = (loops = 1, pauseMs = 100) => {
    const answers: { form?: 'csi' | 'annotation' | 'unchanged'; error?: string }[] = [];
    let stopped = false;
    const loop = Promise.all(Array.from({ length: loops }, async () => {
      while (!stopped) {
        try {
          const p = await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: { metadata: { name: 'probe' }, spec: {
            containers: [{ name: 'c', image: IMAGES.busybox, volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] }],
            volumes: [{ name: 'podinfo', downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } }] } } });
          const v = p.spec!.volumes![0]!;
          answers.push({ form: v.csi ? 'csi' : v.downwardAPI?.items?.[0]?.fieldRef?.fieldPath.startsWith('metadata.annotations') ? 'annotation' : 'unchanged' });
        } catch (err) {
          answers.push({ error: String((err as { body?: string }).body ?? err).slice(0, 600) });
        }
        await sleep(pauseMs);
      }
    }));
    return { stop: async () => { stopped = true; await loop; return answers; } };
  };
  /**
   * Every probe admitted and rewritten: by `from` first, by `to` at the end. With
   * `oldStopsAtOnce` (the replicas stopping are the previous version's, which closed its
   * connections at SIGTERM and stopped listening), refusals where a replica closed the
   * connection under the call, or was gone when the API server dialled it (its endpoint not yet
   * out of the EndpointSlice; the harness's egress proxy answers that dial with a 502), are
   * counted, not failed; nothing else is allowed.
   */
  const admittedThroughout = (answers: Awaited<ReturnType<ReturnType<typeof probeAdmission>['stop']>>, from: string, to: string, oldStopsAtOnce = false) => {
    const forms = answers.map((a) => a.form ?? `refused: ${a.error}`);
    const refused = forms.filter((f) => f !== 'csi' && f !== 'annotation');
    const closedUnderCall = /failed to call webhook: Post \S+ (EOF|read unix \S+ read: connection reset by peer|proxy error from \S+ while dialing \S+, code 502|dial tcp \S+: connect: connection refused)/;
    expect(refused.filter((f) => !(oldStopsAtOnce && closedUnderCall.test(f)))).toEqual([]);
    expect([forms[0], forms.at(-1)]).toEqual([from, to]);
    return { probes: answers.length, [from]: forms.filter((f) => f === from).length, [to]: forms.filter((f) => f === to).length, refused: refused.length };
  };

  it('installs the previous version, and runs pods of every kind under it', { timeout: 600_000 }, async () => {
    await e.core.patchNode({ name: e.node.name, body: { metadata: { labels: { 'ownerrefs.dev/agent': 'true' } } } }, mergePatch); // its DaemonSet's selector
    await helm(e, prevRender, ['install', 'ownerrefs-agent', prevRender.chart, '--set', 'webhook.enabled=true']);
    await readyAgent(e);
    await webhookOn('previous');
    const sleeper = (volumeMounts: Obj[], env: Obj[] = []) => ({ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sh', '-c', WATCH_BLANK], volumeMounts, env });
    const tmpl = (app: string, spec: Obj, annotations?: Record<string, string>) => ({ selector: { matchLabels: { app } },
      template: { metadata: { labels: { app }, ...(annotations ? { annotations } : {}) }, spec: { terminationGracePeriodSeconds: 1, ...spec } } });
    const kep = { downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } };
    const kepEnv = [{ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }];
    await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name: 'emptydir' }, spec: tmpl('emptydir', {
      containers: [sleeper([{ name: 'podinfo', mountPath: '/etc/podinfo' }])], volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory' } }] }, { 'ownerrefs.dev/volume': 'podinfo' }) } as never });
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'csi' }, spec: tmpl('csi', {
      containers: [sleeper([{ name: 'podinfo', mountPath: '/etc/podinfo' }])], volumes: [{ name: 'podinfo', csi: { driver: 'ownerrefs.dev', readOnly: true } }] }) } as never });
    await e.apps.createNamespacedDeployment({ namespace: e.ns, body: { metadata: { name: 'kep' }, spec: tmpl('kep', {
      containers: [sleeper([{ name: 'podinfo', mountPath: '/etc/podinfo' }], kepEnv)], volumes: [{ name: 'podinfo', ...kep }] }) } as never });
    await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name: 'kepds' }, spec: tmpl('kepds', {
      containers: [sleeper([{ name: 'podinfo', mountPath: '/etc/podinfo' }], kepEnv)], volumes: [{ name: 'podinfo', ...kep }] }) } as never });
    // The previous webhook stored the KEP templates as CSI volumes.
    expect((await e.apps.readNamespacedDeployment({ name: 'kep', namespace: e.ns })).spec!.template.spec!.volumes![0]!.csi?.driver).toBe('ownerrefs.dev');
    for (const app of ['emptydir', 'csi', 'kep', 'kepds']) pods[app] = await running(`app=${app}`);
    for (const [app, pod] of Object.entries(pods)) {
      if (app === 'kepds' || app === 'emptydir') continue; // owned by their DaemonSet: orphaning would make another
      await own(pod, owners[0]!); // released by its ReplicaSet: owned by a ConfigMap from now on
    }
    for (const app of ['csi', 'kep']) await settle(pods[app]!, '/etc/podinfo', ['owner-a'], 'owner-a, under the previous version');
    for (const k of ['csi', 'kep']) generations[k] = (await e.apps.readNamespacedDeployment({ name: k, namespace: e.ns })).metadata!.generation!;
  });

  /** Every pod's blank or missing reads of its file since it first appeared: none. */
  const noBlankReads = async () => {
    for (const [app, pod] of Object.entries(pods)) expect({ app, blank: await e.exec(pod, ['sh', '-c', 'cat /tmp/blank 2>/dev/null || true']) }).toEqual({ app, blank: '' });
  };
  const secretCa = async () => (await e.core.readNamespacedSecret({ name: 'ownerrefs-webhook-tls', namespace: 'ownerrefs-system' })).data!['ca.crt'];
  const caBundle = async () => (await e.kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: 'ownerrefs.dev' })).webhooks![0]!.clientConfig.caBundle;

  it('upgrades with helm upgrade: the webhook admits through its rollout (bar calls the previous version\'s stopping replicas drop), files and CSI volumes the previous agent served are kept current, no workload rolls, the certificates carry over', { timeout: 600_000 }, async () => {
    const before = await readyAgent(e);
    const [ca, bundle] = [await secretCa(), await caBundle()];
    const probe = probeAdmission(4, 20);
    await sleep(1_000);
    await helm(e, thisRender, ['upgrade', 'ownerrefs-agent', CHART, '--reset-then-reuse-values']);
    const agent = await readyAgent(e, before.metadata!.name);
    expect(agent.spec!.containers[0]!.image).toBe('localhost/ownerrefs/ownerrefs-agent:dev');
    await webhookOn('dev');
    await sleep(5_000); // past the last old replica's shutdown
    console.log('admission through the upgrade:', admittedThroughout(await probe.stop(), 'csi', 'annotation', true));
    // Every volume the previous agent served follows an owner change now.
    for (const app of ['csi', 'kep']) {
      await own(pods[app]!, owners[1]!);
      await settle(pods[app]!, '/etc/podinfo', ['owner-b'], 'owner-b, after the agent\'s upgrade');
    }
    expect(await namesIn(pods.emptydir!, '/etc/podinfo')).toEqual(['emptydir']);
    expect([await secretCa(), await caBundle()]).toEqual([ca, bundle]);
    // A template the previous webhook rewrote keeps working: a new pod of it, admitted now.
    const admittedBefore = (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=kep' })).items.map((p) => p.metadata!.uid!);
    await e.apps.patchNamespacedDeployment({ name: 'kep', namespace: e.ns, body: { spec: { replicas: 2 } } }, mergePatch);
    const fresh = await running('app=kep', admittedBefore);
    const rs = fresh.metadata!.ownerReferences!.map((o) => o.name);
    await settle(fresh, '/etc/podinfo', rs, 'a new pod of the stored template names its ReplicaSet');
    expect(await e.exec(fresh, ['sh', '-c', 'printf %s "$OWNER_REFERENCES"'])).toContain(rs[0]);
    // Nothing rolled.
    for (const k of ['csi', 'kep']) expect((await e.apps.readNamespacedDeployment({ name: k, namespace: e.ns })).metadata!.generation).toBe(generations[k]! + (k === 'kep' ? 1 : 0));
    await noBlankReads();
    for (const pod of Object.values(pods)) expect((await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns })).metadata!.uid).toBe(pod.metadata!.uid);
  });

  it('keeps one webhook replica through a drain: the PodDisruptionBudget refuses evicting the second', { timeout: 300_000 }, async () => {
    const [first, second] = await webhookOn('dev');
    const evict = (p: V1Pod) => e.core.createNamespacedPodEviction({ name: p.metadata!.name!, namespace: 'ownerrefs-system', body: { metadata: { name: p.metadata!.name!, namespace: 'ownerrefs-system' } } });
    await e.waitFor(async () => (await e.kc.makeApiClient(PolicyV1Api).readNamespacedPodDisruptionBudget({ name: 'ownerrefs-webhook', namespace: 'ownerrefs-system' })).status?.disruptionsAllowed === 1 || undefined, 'the budget allows one disruption');
    await evict(first!);
    const refused = await evict(second!).then(() => 'evicted', (err: { code?: number }) => err.code);
    expect(refused).toBe(429);
    await webhookOn('dev');
  });

  it('restarts the webhook under load without refusing a pod: each replica stops only once the API server has stopped calling it', { timeout: 300_000 }, async () => {
    const restarts = 3;
    const probe = probeAdmission(8, 10);
    for (let i = 0; i < restarts; i++) {
      const old = (await webhookOn('dev')).map((p) => p.metadata!.uid!);
      await e.apps.patchNamespacedDeployment({ name: 'ownerrefs-webhook', namespace: 'ownerrefs-system',
        body: { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } } } } }, mergePatch);
      await e.waitFor(async () => (await webhookOn('dev')).every((p) => !old.includes(p.metadata!.uid!)) || undefined, 'both replicas replaced', 180_000);
    }
    await sleep(5_000);
    const answers = await probe.stop();
    console.log(`admission through ${restarts} restarts:`, admittedThroughout(answers, 'annotation', 'annotation'));
  });

  it('rolls back with helm rollback: the webhook admits throughout, the previous agent serves the same volumes again, nothing rolls', { timeout: 600_000 }, async () => {
    const before = await readyAgent(e);
    const probe = probeAdmission(4, 20);
    await sleep(1_000);
    await helm(e, thisRender, ['rollback', 'ownerrefs-agent']);
    const agent = await readyAgent(e, before.metadata!.name);
    expect(agent.spec!.containers[0]!.image).toBe('localhost/ownerrefs/ownerrefs-agent:previous');
    await webhookOn('previous');
    await sleep(5_000);
    console.log('admission through the rollback:', admittedThroughout(await probe.stop(), 'annotation', 'csi'));
    for (const app of ['csi', 'kep']) {
      await own(pods[app]!, owners[0]!);
      await settle(pods[app]!, '/etc/podinfo', ['owner-a'], 'owner-a, after the rollback');
    }
    await noBlankReads();
    for (const pod of Object.values(pods)) expect((await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns })).metadata!.uid).toBe(pod.metadata!.uid);
  });

  it('uninstalls in the documented order with pods still running: no pod stuck Terminating, no refusal left, what stays as documented; then installs again', { timeout: 600_000 }, async () => {
    // Back on this version, as an uninstall would start.
    await helm(e, thisRender, ['upgrade', 'ownerrefs-agent', CHART, '--reset-then-reuse-values']);
    await readyAgent(e);
    await webhookOn('dev');
    // 1. The webhook's configuration first: nothing waits on the webhook any more.
    await e.kc.makeApiClient(AdmissionregistrationV1Api).deleteMutatingWebhookConfiguration({ name: 'ownerrefs.dev' });
    const plain = await e.core.createNamespacedPod({ namespace: e.ns, dryRun: 'All', body: { metadata: { name: 'after-webhook' }, spec: { containers: [{ name: 'c', image: IMAGES.busybox }] } } });
    expect(plain.metadata!.name).toBe('after-webhook');
    // 2. The workloads that mount ownerrefs.dev CSI volumes, while the agent still answers the kubelet's unpublish.
    await e.apps.deleteNamespacedDeployment({ name: 'csi', namespace: e.ns });
    await e.apps.deleteNamespacedDeployment({ name: 'kep', namespace: e.ns }); // its stored template is the previous version's CSI form
    await e.apps.deleteNamespacedDaemonSet({ name: 'kepds', namespace: e.ns });
    for (const app of ['csi', 'kep']) await e.core.deleteNamespacedPod({ name: pods[app]!.metadata!.name!, namespace: e.ns }); // released: no workload deletes them
    await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns })).items.every((p) => !(p.spec?.volumes ?? []).some((v) => v.csi?.driver === 'ownerrefs.dev')) || undefined,
      'no pod with an ownerrefs.dev CSI volume left', 120_000);
    // 3. helm uninstall: the agents, the webhook, RBAC, policies, the CSIDriver.
    await helm(e, thisRender, ['uninstall', 'ownerrefs-agent']);
    await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: 'ownerrefs-system' })).items.length === 0 || undefined, 'the agent and the webhook gone', 120_000);
    // What stays: the emptyDir pod and its files as last written; the namespace; the webhook's Secret.
    expect(await namesIn(pods.emptydir!, '/etc/podinfo')).toEqual(['emptydir']);
    await e.core.readNamespace({ name: 'ownerrefs-system' });
    await e.core.readNamespacedSecret({ name: 'ownerrefs-webhook-tls', namespace: 'ownerrefs-system' });
    // No pod stuck: the emptyDir pod goes as any pod does.
    await e.apps.deleteNamespacedDaemonSet({ name: 'emptydir', namespace: e.ns });
    await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns })).items.filter((p) => p.metadata?.deletionTimestamp).length === 0 || undefined, 'no pod Terminating', 120_000);
    // 4. A plain install again (it takes over the namespace it kept).
    await helm(e, thisRender, ['install', 'ownerrefs-agent', CHART]);
    await readyAgent(e);
    await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name: 'again' }, spec: {
      selector: { matchLabels: { app: 'again' } }, template: { metadata: { labels: { app: 'again' }, annotations: { 'ownerrefs.dev/volume': 'podinfo' } }, spec: {
        terminationGracePeriodSeconds: 1, containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] }],
        volumes: [{ name: 'podinfo', emptyDir: {} }] } } } } as never });
    await settle(await running('app=again'), '/etc/podinfo', ['again'], 'served after the reinstall');
  });

  it('moves from webhook mode to policy mode through both under pod creation: helm refuses the one-step switch, no pod is refused, no webhook is left in the path', { timeout: 600_000 }, async () => {
    const admission = e.kc.makeApiClient(AdmissionregistrationV1Api);
    const upgrade = (mode: string) => helm(e, thisRender, ['upgrade', 'ownerrefs-agent', CHART, '--reset-then-reuse-values', '--set', `admission.mode=${mode}`]);
    await upgrade('webhook');
    await webhookOn('dev');
    const probe = probeAdmission(4, 20);
    await sleep(1_000);
    // Straight to policy, helm would delete the webhook's configuration before the API server
    // loads the policy: the chart refuses, and the release stays as it was.
    await expect(upgrade('policy')).rejects.toThrow(/admission\.mode=both first/);
    expect((await admission.listMutatingWebhookConfiguration()).items.map((h) => h.metadata!.name)).toEqual(['ownerrefs.dev']);
    await upgrade('both');
    expect((await admission.listMutatingAdmissionPolicyBinding()).items.length).toBeGreaterThan(0);
    await sleep(5_000); // the API server loads a new policy within about a second
    await upgrade('policy');
    await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: 'ownerrefs-system', labelSelector: 'app.kubernetes.io/name=ownerrefs-webhook' })).items.length === 0 || undefined,
      'the webhook\'s replicas gone', 120_000);
    await sleep(3_000);
    console.log('admission from webhook mode through both to policy mode:', admittedThroughout(await probe.stop(), 'annotation', 'annotation'));
    expect((await admission.listMutatingWebhookConfiguration()).items.map((h) => h.metadata!.name)).toEqual([]);
  });

  it('moves back from policy mode to webhook mode through both under pod creation: helm refuses the one-step switch, no pod is refused, no policy, lifter or gated pod is left', { timeout: 600_000 }, async () => {
    const admission = e.kc.makeApiClient(AdmissionregistrationV1Api);
    const upgrade = (mode: string) => helm(e, thisRender, ['upgrade', 'ownerrefs-agent', CHART, '--reset-then-reuse-values', '--set', `admission.mode=${mode}`]);
    const ours = async () => (await admission.listMutatingAdmissionPolicyBinding()).items.map((b) => b.metadata!.name!).filter((n) => n.endsWith('.ownerrefs.dev'));
    expect(await ours()).toContain(policyName('pods'));
    const probe = probeAdmission(4, 20);
    await sleep(1_000);
    // Straight to the webhook, its configuration (failurePolicy Fail) would be in place before
    // its replicas are ready: the chart refuses, and the release stays as it was.
    await expect(upgrade('webhook')).rejects.toThrow(/admission\.mode=both first/);
    expect((await admission.listMutatingWebhookConfiguration()).items).toEqual([]);
    await upgrade('both');
    await webhookOn('dev');
    await upgrade('webhook');
    await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: 'ownerrefs-system', labelSelector: 'app.kubernetes.io/name=ownerrefs-gate' })).items.length === 0 || undefined,
      'the lifter\'s replicas gone', 120_000);
    await sleep(3_000);
    console.log('admission from policy mode through both to webhook mode:', admittedThroughout(await probe.stop(), 'annotation', 'annotation'));
    expect(await ours()).toEqual([]);
    expect((await admission.listMutatingWebhookConfiguration()).items.map((h) => h.metadata!.name)).toEqual(['ownerrefs.dev']);
    expect((await e.core.listPodForAllNamespaces({ labelSelector: GATED_LABEL })).items.map((p) => p.metadata!.name)).toEqual([]);
  });
});
