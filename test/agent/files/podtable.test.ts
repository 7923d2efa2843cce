import { annotationsRead } from '../../../projections/annotations.ts';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../../agent/node/nodeconfig.ts';
import { admit } from '../../../agent/files/admission.ts';
import { PodTable, dirOf } from '../../../agent/files/podtable.ts';
import type { ResolvedVolume } from '../../../agent/files/volume/resolve.ts';
import { slimView, type PodView } from '../../../agent/node/podview.ts';

/** A table whose directory watches and gauges are plain records, to look at after each step. */
function table() {
  const watched = new Set<string>();
  const gauges = { pods: 0, volumes: 0 };
  const t = new PodTable({
    dirs: { watch: (d) => watched.add(d), unwatch: (d) => watched.delete(d), close: async () => {} },
    metrics: {
      podsTracked: { set: (n: number) => (gauges.pods = n) },
      volumesTracked: { inc: () => gauges.volumes++, dec: () => gauges.volumes-- },
    } as never,
  });
  return { t, watched, gauges };
}

const vol = (disk: string, name: string): ResolvedVolume => ({
  name, target: { root: '/k/pods', components: [disk, 'volumes', 'kubernetes.io~empty-dir', name] },
});
const pod = (name: string) => ({ kind: 'Pod' as const, name, namespace: 'ns', uid: name });

describe('PodTable', () => {
  it('finds a pod by uid, by volume directory and by on-disk UID, and watches each directory once', () => {
    const { t, watched, gauges } = table();
    const a = t.track('a', pod('a'), 'disk-a');
    t.setVolumes('a', a, [vol('disk-a', 'v1'), vol('disk-a', 'v2')], []);
    expect(t.get('a')).toBe(a);
    expect(t.atDir(dirOf(vol('disk-a', 'v2').target))).toMatchObject({ uid: 'a', volume: 'v2', t: a });
    expect(t.onDisk('disk-a')).toEqual({ uid: 'a', t: a });
    expect([...watched]).toEqual([dirOf(vol('disk-a', 'v1').target), dirOf(vol('disk-a', 'v2').target)]);
    expect(gauges).toEqual({ pods: 1, volumes: 2 });
    expect([...a.verify]).toEqual(['v1', 'v2']); // a new volume is checked on disk first
  });

  it('drops what a pod no longer has: its dropped volumes, then everything on untrack', () => {
    const { t, watched, gauges } = table();
    const a = t.track('a', pod('a'), 'disk-a');
    t.setVolumes('a', a, [vol('disk-a', 'v1'), vol('disk-a', 'v2')], []);
    t.synced(a, 'v1', 'fp', [], {});
    t.synced(a, 'v2', 'fp', [], {});
    t.setVolumes('a', a, [vol('disk-a', 'v2')], []);
    expect(t.atDir(dirOf(vol('disk-a', 'v1').target))).toBeUndefined();
    expect([...a.synced.keys()]).toEqual(['v2']);
    expect(gauges.volumes).toBe(1);
    expect(t.untrack('a')).toBe(true);
    expect(t.untrack('a')).toBe(false);
    expect([t.get('a'), t.onDisk('disk-a'), watched.size, gauges.pods, gauges.volumes]).toEqual([undefined, undefined, 0, 0, 0]);
  });

  it('never gives one on-disk directory to a second pod, and moves the index when a pod changes directory', () => {
    const { t } = table();
    const a = t.track('a', pod('a'), 'shared');
    const b = t.track('b', pod('b'), 'shared');
    expect(t.onDisk('shared')?.uid).toBe('a');
    t.setDisk('a', a, 'disk-a');
    expect(t.onDisk('disk-a')?.uid).toBe('a');
    expect(t.onDisk('shared')).toBeUndefined(); // b does not inherit it silently
    t.setDisk('b', b, 'disk-b');
    expect(t.onDisk('disk-b')?.uid).toBe('b');
  });
});

describe('slimView (what the table keeps of a pod, and what a streamed first list holds)', () => {
  const DRIVER = 'ownerrefs.dev';
  const items = JSON.stringify({
    items: [
      { path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } },
      { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
      { path: 'annotations', fieldRef: { fieldPath: 'metadata.annotations' } },
      { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
      { path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } },
      { path: 'init-mem', resourceFieldRef: { containerName: 'init', resource: 'requests.memory' } },
    ],
  });
  const owners = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d4f', uid: 'rs-1', controller: true, blockOwnerDeletion: true }];
  // The pod as the API server sends it: status, managedFields, a full container spec.
  const full = (over: { annotations?: Record<string, string>; optIn?: false; volumes?: unknown[] } = {}) => ({
    apiVersion: 'v1', kind: 'Pod',
    metadata: {
      name: 'web-5d4f-x', namespace: 'shop', uid: 'u-1', resourceVersion: '77', generateName: 'web-5d4f-',
      labels: { app: 'web', 'pod-template-hash': '5d4f' }, annotations: { ...(over.optIn === false ? {} : { 'ownerrefs.dev/volume': 'podinfo' }), note: 'x', ...over.annotations },
      ownerReferences: owners,
      managedFields: [{ manager: 'kube-controller-manager', operation: 'Update', fieldsV1: { 'f:metadata': {} } }],
    },
    spec: {
      nodeName: 'n1',
      containers: [{ name: 'app', image: 'busybox', env: [{ name: 'A', value: 'b' }], resources: { limits: { cpu: '250m' }, requests: { memory: '64Mi' } } }],
      initContainers: [{ name: 'init', image: 'busybox', resources: { requests: { memory: '32Mi' } } }],
      volumes: over.volumes ?? [{ name: 'podinfo', emptyDir: {} }],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], podIP: '10.0.0.7' },
  }) as unknown as PodView;

  const cases: { name: string; pod: PodView }[] = [
    { name: 'an annotated pod with an emptyDir volume', pod: full() },
    { name: 'a pod with a CSI volume of downwardAPI items (labels, annotations, container resources)', pod: full({
      optIn: false,
      volumes: [{ name: 'podinfo', csi: { driver: DRIVER, volumeAttributes: { downwardAPI: items } } }, { name: 'plain', csi: { driver: DRIVER } }],
    }) },
    { name: 'a mirror pod of a static pod', pod: full({ annotations: { 'kubernetes.io/config.mirror': 'abc123' } }) },
    { name: 'a pod that did not opt in', pod: full({ optIn: false }) },
  ];

  it('keeps what the annotation keeper reads: our annotations (read or not), the env and volume items that read them, the resourceVersion', () => {
    const reads = { name: 'O', valueFrom: { fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/owner-references']" } } };
    const p = full({ optIn: false, annotations: { 'ownerrefs.dev/owner-references': 'v', 'other.io/x': 'y', 'ownerrefs.dev/workload-name': 'not read', 'ownerrefs.dev/parked': 'x'.repeat(200_000) } }) as unknown as { spec: { containers: { env: unknown[] }[] } };
    p.spec.containers[0]!.env.push(reads);
    const slim = slimView(p as unknown as PodView);
    expect(annotationsRead(slim.spec)).toEqual(['ownerrefs.dev/owner-references']);
    expect(slim.spec!.containers![0]!.env).toEqual([reads]); // not the plain value beside it
    expect(slim.metadata).toMatchObject({ resourceVersion: '77', annotations: { 'ownerrefs.dev/owner-references': 'v' } });
    // Ours, read or not (the keeper removes one not read); no other, of the prefix or not.
    expect(Object.keys(slim.metadata!.annotations!)).toEqual(['ownerrefs.dev/owner-references', 'ownerrefs.dev/workload-name']);
  });
  const every = { ...DEFAULT_SETTINGS, envFile: true, dependentsFile: true, nodeFile: true, followOwners: true };
  const options = {
    kubeletRoot: '/var/lib/kubelet', settings: every, maxBytes: 1 << 20, csiDriver: DRIVER, allocatable: { cpu: '4', memory: '8Gi' },
    context: { node: { name: 'n1', uid: 'node-1' }, chain: { items: owners, end: { reason: 'Top' as const, message: '' } } },
  };

  it.each(cases)('admits $name exactly as the whole pod', ({ pod: p }) => {
    const slim = slimView(p);
    expect(admit(slim, options)).toEqual(admit(p, options));
    expect(slimView(slim)).toEqual(slim); // a held view upserted again is kept as it is
    expect(slim.status).toEqual({ phase: 'Running' }); // the phase alone (the annotation keeper skips finished pods)
    expect(slim.metadata).not.toHaveProperty('managedFields');
    expect(JSON.stringify(slim)).not.toContain('busybox'); // containers: their names and resources at most
  });
});
