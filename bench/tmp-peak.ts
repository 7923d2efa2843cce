// Ad hoc: where the start-up peak comes from (not committed).
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { VolumeDirWatcher } from '../agent/volume/dirwatch.ts';
import { AgentMetrics } from '../agent/monitoring/metrics.ts';
import { Reconciler } from '../agent/policy/reconciler.ts';
import { FsVolumeWriter, TEMP_PREFIX } from '../agent/volume/writer.ts';

const N = Number(process.argv[2] ?? 1000);
const mode = process.argv[3] ?? 'asis';
const hwm = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
const root = mkdtempSync('/dev/shm/peak-');
const uid = (i: number) => `0000${i.toString(16).padStart(4, '0')}-aaaa-bbbb-cccc-${i.toString().padStart(12, '0')}`;
for (let i = 0; i < N; i++) mkdirSync(path.join(root, 'pods', uid(i), 'volumes', 'kubernetes.io~empty-dir', 'podinfo'), { recursive: true, mode: 0o777 });
function podJson(i: number) {
  const ts = '2026-11-25T12:00:00Z';
  return {
    metadata: {
      name: `bench-${String(i).padStart(4, '0')}`, namespace: 'ownerrefs-bench', uid: uid(i), resourceVersion: String(1000 + i), generation: 1, creationTimestamp: ts,
      labels: { app: 'bench', shard: String(i % 10) }, annotations: { 'ownerrefs.dev/volume': 'podinfo' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner-a', uid: 'c0ffee00-0000-0000-0000-000000000001', controller: true, blockOwnerDeletion: true }],
      managedFields: [
        { manager: 'bench', operation: 'Update', apiVersion: 'v1', time: ts, fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:annotations': { '.': {}, 'f:ownerrefs.dev/volume': {} }, 'f:labels': { '.': {}, 'f:app': {}, 'f:shard': {} }, 'f:ownerReferences': { '.': {}, 'k:{"uid":"c0ffee00-0000-0000-0000-000000000001"}': {} } }, 'f:spec': { 'f:automountServiceAccountToken': {}, 'f:containers': { 'k:{"name":"app"}': { '.': {}, 'f:image': {}, 'f:imagePullPolicy': {}, 'f:name': {}, 'f:resources': {}, 'f:terminationMessagePath': {}, 'f:terminationMessagePolicy': {}, 'f:volumeMounts': { '.': {}, 'k:{"mountPath":"/etc/podinfo"}': { '.': {}, 'f:mountPath': {}, 'f:name': {}, 'f:readOnly': {} } } } }, 'f:dnsPolicy': {}, 'f:enableServiceLinks': {}, 'f:nodeName': {}, 'f:restartPolicy': {}, 'f:schedulerName': {}, 'f:securityContext': {}, 'f:terminationGracePeriodSeconds': {}, 'f:volumes': { '.': {}, 'k:{"name":"podinfo"}': { '.': {}, 'f:emptyDir': { '.': {}, 'f:medium': {}, 'f:sizeLimit': {} }, 'f:name': {} } } } } },
      ],
    },
    spec: {
      volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
      containers: [{ name: 'app', image: 'bench.invalid/app:1', resources: {}, volumeMounts: [{ name: 'podinfo', readOnly: true, mountPath: '/etc/podinfo' }], terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'IfNotPresent' }],
      restartPolicy: 'Always', terminationGracePeriodSeconds: 0, dnsPolicy: 'ClusterFirst', automountServiceAccountToken: false, nodeName: 'bench-node', securityContext: {}, schedulerName: 'default-scheduler',
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }, { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
      priority: 0, enableServiceLinks: true, preemptionPolicy: 'PreemptLowerPriority',
    },
    status: { phase: 'Pending', qosClass: 'BestEffort' },
  };
}
const body = Buffer.from(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '99999' }, items: Array.from({ length: N }, (_, i) => podJson(i)) }));
const chunks: Buffer[] = [];
for (let o = 0; o < body.length; o += 16384) chunks.push(Buffer.from(body.subarray(o, o + 16384)));
const metrics = new AgentMetrics({ processMetrics: false });
const r = new Reconciler({
  kubeletRoot: root, writer: new FsVolumeWriter(), events: { warn: () => true }, log: pino({ level: 'silent' }), metrics,
  dirs: (on) => new VolumeDirWatcher(root, on, () => {}, (n) => n.startsWith(TEMP_PREFIX)),
});
r.setNode({ name: 'bench-node', uid: 'n-1' });
await sleep(500);
const h0 = hwm(); const r0 = rss();
// As the client does: concatenate, decode, parse.
let list: { items: unknown[] } | undefined = JSON.parse(Buffer.concat(chunks).toString('utf8'));
chunks.length = 0;
const h1 = hwm();
r.replace(list!.items as never);
list = undefined;
const h2 = hwm();
await r.idle();
const h3 = hwm();
await sleep(2000); await r.idle();
console.log(JSON.stringify({ mode, N, bodyMiB: +(body.length / 1048576).toFixed(2), rss0: +r0.toFixed(1), hwm0: +h0.toFixed(1), afterParse: +h1.toFixed(1), afterReplace: +h2.toFixed(1), afterWrites: +h3.toFixed(1), end: +hwm().toFixed(1), rssEnd: +rss().toFixed(1) }));
await r.close();
rmSync(root, { recursive: true, force: true });
process.exit(0);
