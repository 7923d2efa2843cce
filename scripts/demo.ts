// `npm run demo`: the whole product on this machine, no cluster needed.
// Starts the local control plane (real etcd, kube-apiserver, controller-manager and
// scheduler), a real node (the kubelet with containerd and runc) and the agent with the
// RBAC from daemonset.yaml; applies examples/daemonset-example.yaml; then orphans and
// re-adopts the DaemonSet's pod and prints what its container reads, from inside it.
// A machine that cannot run a real node (no root, containerd or cgroups) gets the
// kubelet emulator instead, says so, and the file is read on the host.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { AppsV1Api, type KubernetesObject, type V1DaemonSet } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { apply } from '../localcluster/agentproc.ts';
import { podExec } from '../localcluster/exec.ts';
import { IMAGES } from '../localcluster/node/realnode.ts';
import { mergePatch } from '../localcluster/patch.ts';
import { waitFor } from '../localcluster/wait.ts';
import { startLocalCluster } from './localcluster.ts';

const ROOT = path.join(import.meta.dirname, '..');
const NODE = 'demo-node';
const NS = 'default';
const t0 = Date.now();
const say = (msg: string) => process.stdout.write(`${((Date.now() - t0) / 1000).toFixed(2).padStart(7)}s  ${msg}\n`);

async function main(): Promise<void> {
  const lc = await startLocalCluster({ node: NODE, say, realNode: true });
  const { kc, core, agent, stop } = lc;
  try {
    await waitFor(() => core.readNamespacedServiceAccount({ name: 'default', namespace: NS }));
    const objs = parseAllDocuments(readFileSync(path.join(ROOT, 'examples/daemonset-example.yaml'), 'utf8'))
      .map((d) => d.toJS() as KubernetesObject)
      .map((o) => ({ ...o, metadata: { ...o.metadata, namespace: NS } }));
    // No registry here: the real node runs the busybox image made locally.
    for (const o of objs) if (o.kind === 'DaemonSet') for (const c of (o as V1DaemonSet).spec!.template.spec!.containers) Object.assign(c, { image: IMAGES.busybox, imagePullPolicy: 'Never' });
    await apply(kc, objs);
    say(`applied examples/daemonset-example.yaml in namespace ${NS}`);

    const pod = await waitFor(async () => (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=podinfo-demo' })).items
      .find((p) => !lc.realNode || p.status?.phase === 'Running'), { timeoutMs: 120_000, describe: 'the DaemonSet pod' });
    const exec = podExec(kc);
    const read = lc.realNode
      ? () => exec({ namespace: NS, name: pod.metadata!.name!, container: 'app' }, ['cat', '/etc/podinfo/ownerReferences']).catch(() => undefined)
      : async () => {
        const file = path.join(lc.kubelet!.volumeDir(pod.metadata!.uid!, 'podinfo'), 'ownerReferences');
        return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
      };
    say(lc.realNode
      ? `pod ${pod.metadata!.name} Running on ${NODE}; reading /etc/podinfo/ownerReferences from inside its container (exec through the API server)`
      : `pod ${pod.metadata!.name} bound to ${NODE}; reading the file the agent writes on the host`);
    let last: string | undefined;
    const show = async (until: (text: string) => boolean) => waitFor(async () => {
      const text = await read();
      if (text !== undefined && text !== last) {
        last = text;
        say(`ownerReferences = ${text}`);
      }
      return text !== undefined && until(text);
    }, { intervalMs: 5, timeoutMs: 60_000 });
    const names = (kind: string) => (t: string) => t.includes(`"kind":"${kind}"`);
    await show(names('DaemonSet'));
    if (lc.realNode) {
      const log = await waitFor(async () => (await core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: NS })).split('\n').find((l) => l.startsWith('my owners:')));
      say(`the container's own log: ${log}`);
    }

    // The controller keeps the older of two daemon pods by creation time at one-second
    // resolution; let a second pass so the replacement it makes is strictly younger.
    const created = new Date(pod.metadata!.creationTimestamp!).getTime();
    await waitFor(() => Date.now() >= created + 1_100);
    say('relabelling the pod so the DaemonSet selector no longer matches: the controller orphans it');
    const patchLabel = (app: string) => core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: NS, body: { metadata: { labels: { app } } } }, mergePatch);
    await patchLabel('orphaned');
    await show((t) => t.endsWith('"items":[]}'));
    say('restoring the label: the controller adopts the pod again');
    await patchLabel('podinfo-demo');
    await show(names('DaemonSet'));
    const apps = kc.makeApiClient(AppsV1Api);
    const ds = await apps.readNamespacedDaemonSet({ name: 'podinfo-demo', namespace: NS });
    say(`done: the file names DaemonSet podinfo-demo (uid ${ds.metadata!.uid}) again`);
    say(`agent: ${await agent.metric('ownerrefs_file_writes_total')} file writes, ${await agent.metric('ownerrefs_api_requests_total')} API requests in all`);
  } finally {
    say('stopping: pods, kubelet, containerd, control plane; removing their temporary directories');
    await stop();
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
