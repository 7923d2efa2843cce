// The product as users install it: the image built from the Dockerfile (localcluster/image),
// imported into the real node's containerd, and the chart's rendering applied with
// kubectl's server-side apply (support/installed.ts, which says how the harness differs
// from a cluster). The agent runs as the DaemonSet's pod, with its hostPath mounts and
// mount propagation, and a pod's container reads its owners.

import { execFile, execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { apply } from '../../localcluster/agentproc.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { freePort } from '../../localcluster/webhookproc.ts';
import { CHART, helmBin } from '../../scripts/gen-manifests.ts';
import { NODE_FLAGS, NODE_FLAGS_OPTIMIZING } from '../../agent/config.ts';
import { items } from '../support/e2e.ts';
import { kubectlOwnerrefs } from '../support/plugin.ts';
import { readyAgent as waitReady, rendering as renderFor, type Rendering } from '../support/installed.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..', '..');
const IMAGE_TOOLS = ['podman', 'debootstrap'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
if (CONTAINERS && IMAGE_TOOLS.length > 0) console.warn(`NO DAEMONSET TEST: this machine lacks ${IMAGE_TOOLS.join(', ')}; SKIPPED (CI installs them)`);

describe.runIf(CONTAINERS && IMAGE_TOOLS.length === 0)('the agent installed as a DaemonSet from its image, on a real node', () => {
  const e = useRealNode('ds', { agent: false });

  let r: Rendering;
  const rendering = (values: string[] = []) => renderFor(e, r, values);
  const readyAgent = (not?: string) => waitReady(e, not);
  /** What the agent container's process runs (its /proc/1/cmdline), read inside the container with the image's node. */
  const commandOf = async (agent: V1Pod): Promise<string[]> => JSON.parse(await e.waitFor(
    () => e.exec(agent, ['node', '-p', "JSON.stringify(require('fs').readFileSync('/proc/1/cmdline', 'utf8').split('\\0').filter(Boolean))"]).catch(() => ''),
    'the agent container\'s command line, read in it')) as string[];
  /** A pod's container reads its ownerReferences, naming the DaemonSet, from each of its volumes. */
  const readsOwners = async (pod: V1Pod, name: string, uid: string): Promise<void> => {
    // The memory-backed emptyDir is a tmpfs the kubelet mounted after the agent started: only
    // HostToContainer propagation lets the agent's writes land in it.
    for (const dir of ['/etc/podinfo', '/etc/csi']) {
      const got = await e.waitFor(async () => {
        const text = await e.exec(pod, ['cat', `${dir}/ownerReferences`]).catch(() => '');
        return text.includes('"kind":"DaemonSet"') ? text : undefined;
      }, `${dir}: the DaemonSet named, read in the container`);
      expect(items(got)).toEqual([expect.objectContaining({ kind: 'DaemonSet', name, uid })]);
    }
  };
  /** A DaemonSet whose pod opts in with an emptyDir and a CSI volume; its uid and its pod once Running. */
  const reader = async (name: string): Promise<{ uid: string; pod: V1Pod }> => {
    const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: { metadata: { name }, spec: {
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name }, annotations: { 'ownerrefs.dev/volume': 'podinfo' } }, spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'],
          volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }, { name: 'csi', mountPath: '/etc/csi', readOnly: true }] }],
        volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }, { name: 'csi', csi: { driver: 'ownerrefs.dev', readOnly: true } }],
      } },
    } } });
    const pod: V1Pod = await e.waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: `app=${name}` }))
      .items.find((p) => p.status?.phase === 'Running'), `the ${name} pod Running`, 180_000);
    return { uid: ds.metadata!.uid!, pod };
  };

  beforeAll(async () => {
    execFileSync('mount', ['--make-rshared', '/']);
    const archive = (await run('bash', [path.join(ROOT, 'localcluster', 'image', 'build.sh')], { maxBuffer: 1 << 24 })).stdout.trim().split('\n').pop()!;
    await e.node.importImage!(archive);
    r = { helm: helmBin(), chart: CHART, image: { repository: 'localhost/ownerrefs/ownerrefs-agent', tag: 'dev' }, port: await freePort() };
    await e.core.patchNode({ name: e.node.name, body: { metadata: { labels: { 'ownerrefs.dev/agent': 'true' } } } }, mergePatch);
    await apply(e.kc, rendering() as KubernetesObject[]);
  }, 900_000);

  it('runs the agent as the DaemonSet pod, and a pod\'s container reads its owners', { timeout: 400_000 }, async () => {
    const agent = await readyAgent();
    expect(agent.spec!.containers[0]!.image).toBe('localhost/ownerrefs/ownerrefs-agent:dev');
    expect(await commandOf(agent)).toEqual(['node', ...NODE_FLAGS, 'dist/agent/main.js', ...agent.spec!.containers[0]!.args!]); // the image's ENTRYPOINT
    // The docs' `kubectl exec ds/ownerrefs-agent -- ownerrefs-agent doctor`: the command is on PATH in the image.
    expect(await e.exec(agent, ['ownerrefs-agent', '--help'])).toMatch(/^Usage: ownerrefs-agent <command>/);
    // Its exit status too, through the image's node: the image has no shell.
    const doctor = "const r = require('child_process').spawnSync('ownerrefs-agent', ['doctor'], { encoding: 'utf8' }); process.stdout.write(r.stdout + 'exit ' + r.status + '\\n')";
    expect(await e.exec(agent, ['node', '-e', doctor])).toMatch(/^OK +API server.*\n(.*\n)*exit [01]\n$/m);
    const { uid, pod } = await reader('ds-reader');
    await readsOwners(pod, 'ds-reader', uid);
  });

  it('kubectl ownerrefs: status, doctor --node in the node\'s agent pod, inject; and on a node whose agent cannot start, why', { timeout: 400_000 }, async () => {
    const agent = await readyAgent();
    const plugin = await kubectlOwnerrefs(e.cp.kubeconfigPath);
    const status = await plugin('status');
    expect(status.stdout).toMatch(new RegExp(`^  ${e.node.name} +Running +true +yes +dev$`, 'm'));
    expect(status.stdout).toMatch(/^  ownerrefs-agent\.ownerrefs\.dev: bound/m);
    expect(status.stdout).toMatch(/^  annotation-writers\.ownerrefs\.dev: bound/m);
    expect(status.stdout).not.toContain('PODS WHOSE ANNOTATIONS THE AGENT COULD NOT WRITE');
    // A refusal as the agent reports it (its Event on the pod): status lists the pod, with the message.
    await e.core.createNamespacedEvent({ namespace: e.ns, body: { metadata: { generateName: 'refused-' }, reason: 'OwnerRefsAnnotationFailed', type: 'Warning',
      message: "ValidatingAdmissionPolicy 'ownerrefs-agent.ownerrefs.dev' denied request: the ownerrefs agent may not change a pod's labels",
      involvedObject: { kind: 'Pod', namespace: e.ns, name: 'stamped', apiVersion: 'v1' } } });
    const refused = await plugin('status');
    expect(refused.stdout).toContain('PODS WHOSE ANNOTATIONS THE AGENT COULD NOT WRITE');
    expect(refused.stdout).toMatch(new RegExp(`^  ${e.ns}/stamped: ValidatingAdmissionPolicy 'ownerrefs-agent\\.ownerrefs\\.dev' denied request: the ownerrefs agent may not change a pod's labels$`, 'm'));
    // doctor --node: the refusals of pods on that node only ('stamped' is on none), with the message.
    const onNode = (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=ds-reader' })).items[0]!.metadata!.name!;
    await e.core.createNamespacedEvent({ namespace: e.ns, body: { metadata: { generateName: 'refused-' }, reason: 'OwnerRefsAnnotationFailed', type: 'Warning',
      message: "ValidatingAdmissionPolicy 'ownerrefs-agent.ownerrefs.dev' denied request: the ownerrefs agent may not change a pod's annotations but its own",
      involvedObject: { kind: 'Pod', namespace: e.ns, name: onNode, apiVersion: 'v1' } } });
    const doctor = await plugin('doctor', '--node', e.node.name);
    expect(doctor.stdout).toMatch(/^OK   annotation writes: none refused/m);
    expect(doctor.stdout).toMatch(new RegExp(`^PODS WHOSE ANNOTATIONS THE AGENT COULD NOT WRITE .*\\n  ${e.ns}/${onNode}: ValidatingAdmissionPolicy .*may not change a pod's annotations but its own$`, 'm'));
    expect(doctor.stdout).not.toContain('/stamped:');
    expect(doctor.stdout).toContain(`agent pod ownerrefs-system/${agent.metadata!.name} on ${e.node.name}:`);
    expect(doctor.stdout).toMatch(/^OK   kubelet root: /m);
    expect(doctor.stdout).toMatch(/^OK   token: names node /m);
    const injected = await plugin('inject', '-f', path.join(ROOT, 'examples', 'kep', 'env-daemonset.yaml'));
    expect(injected.stdout).toContain("fieldPath: metadata.annotations['ownerrefs.dev/owner-references']");
    // The agent pod of a node whose kubelet root is not where the chart says: it cannot start.
    await apply(e.kc, rendering(['--set', 'kubeletRootDir=/var/snap/nowhere/kubelet']) as KubernetesObject[]);
    const stuck = await e.waitFor(async () => {
      const r = await plugin('doctor', '--node', e.node.name);
      return /FailedMount/.test(r.stdout) ? r : undefined;
    }, 'doctor says why the agent does not start', 120_000);
    expect(stuck.status).toBe(1);
    expect(stuck.stdout).toMatch(/is not running \(Pending, ready false\)/);
    expect(stuck.stdout).toMatch(/FailedMount: .*\/var\/snap\/nowhere\/kubelet\/pods/);
    const unkept = await plugin('status');
    expect(unkept.stdout).toMatch(new RegExp(`^  ${e.node.name} +Pending +false`, 'm'));
    await apply(e.kc, rendering() as KubernetesObject[]);
    await readyAgent();
  });

  it('rolls the agent onto V8\'s optimising compilers with v8.optimizingCompilers, and a new pod reads its owners', { timeout: 400_000 }, async () => {
    const before = await readyAgent();
    await apply(e.kc, rendering(['--set', 'v8.optimizingCompilers=true']) as KubernetesObject[]);
    const agent = await readyAgent(before.metadata!.name);
    expect(await commandOf(agent)).toEqual(['node', ...NODE_FLAGS_OPTIMIZING, 'dist/agent/main.js', ...agent.spec!.containers[0]!.args!]);
    // A pod made after the roll: its files come from the rolled agent.
    const { uid, pod } = await reader('ds-reader-optimising');
    await readsOwners(pod, 'ds-reader-optimising', uid);
  });
});
