// The reconciler's CSI section: which pods it tracks without the annotation, extra
// targets per on-disk pod UID, waiting for a pod, and unpublish never racing a sync.

import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { targetFor } from '../../../agent/files/csi/paths.ts';
import { VolumeDirWatcher } from '../../../agent/files/volume/dirwatch.ts';
import { AgentMetrics } from '../../../agent/monitoring/metrics.ts';

import { Reconciler } from '../../../agent/files/reconciler.ts';
import { FsVolumeWriter, type VolumeWriter } from '../../../agent/files/volume/writer.ts';
import { FILES } from '../../../projections/index.ts';
import { agentKit, memoryLogger, RecordingEvents } from '../../support/agentkit.ts';
import { owner, pod } from '../../support/fixtures.ts';
import { makeVolume, tmpDir } from '../../support/tmpdir.ts';
import { waitFor } from '../../../localcluster/wait.ts';
import { type PodView } from '../../../agent/node/podview.ts';

const DRIVER = 'ownerrefs.dev';
const csiVolume = (driver = DRIVER) => ({ name: 'podinfo', csi: { driver, readOnly: true } });
const tracked = async (k: { metrics: AgentMetrics }) =>
  (await k.metrics.registry.getSingleMetric('ownerrefs_pods_tracked')!.get()).values[0]!.value;

/** The directory the kubelet makes before it calls NodePublishVolume (the target's parent). */
function kubeletParent(root: string, uid: string, volume = 'podinfo') {
  const t = targetFor(root, uid, volume);
  mkdirSync(path.join(root, ...t.target.components.slice(0, -1)), { recursive: true, mode: 0o750 });
  return { ...t, dir: path.join(root, ...t.target.components) };
}

describe('Reconciler in CSI mode', () => {
  it.each([
    { what: 'an inline volume of the driver', volumes: [csiVolume()], driver: DRIVER, want: 1 },
    { what: 'only another driver\'s inline volume', volumes: [csiVolume('other.dev')], driver: DRIVER, want: 0 },
    { what: 'an inline volume of the driver, CSI mode off', volumes: [csiVolume()], driver: undefined, want: 0 },
  ])('tracks a pod without the annotation that has $what: $want', async ({ volumes, driver, want }) => {
    const k = agentKit(driver ? { csiDriver: driver } : {});
    k.reconciler.upsert(pod({ annotation: undefined, volumes }));
    expect(await tracked(k)).toBe(want);
  });

  it('keeps the annotation\'s emptyDir and a published CSI volume of one pod current together', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    const p = pod({ owners: [owner({ name: 'one' })], volumes: [{ name: 'podinfo', emptyDir: {} }, { name: 'csi', csi: { driver: DRIVER } }] });
    const uid = p.metadata!.uid!;
    const empty = makeVolume(k.root, uid);
    k.reconciler.upsert(p);
    const t = kubeletParent(k.root, uid, 'csi');
    expect(await k.reconciler.publish(uid, 'csi', t.target)).toBe(true);
    k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'two' })] } });
    for (const dir of [empty, t.dir]) await waitFor(() => readFileSync(path.join(dir, FILES.ownerReferences), 'utf8').includes('"name":"two"'));
  });

  it('publish answers false for a pod it does not track, and writes nothing', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    const t = kubeletParent(k.root, 'aaaaaaaa-0000-4000-8000-000000000000');
    expect(await k.reconciler.publish(t.diskUid, t.volume, t.target)).toBe(false);
    expect(existsSync(t.dir)).toBe(false);
  });

  it('waitForPod resolves true when the pod arrives, and false when it does not', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    const p = pod({ annotation: undefined, volumes: [csiVolume()] });
    const waiting = k.reconciler.waitForPod(p.metadata!.uid!, 60_000);
    k.reconciler.upsert(p);
    expect(await waiting).toBe(true);
    expect(await k.reconciler.waitForPod(p.metadata!.uid!, 0)).toBe(true);
    expect(await k.reconciler.waitForPod('bbbbbbbb-0000-4000-8000-000000000000', 1)).toBe(false);
  });

  it('finds a static pod by the on-disk UID of its mirror annotation', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    const p = pod({ annotation: undefined, volumes: [csiVolume()], annotations: { 'kubernetes.io/config.mirror': 'static0hash' } });
    k.reconciler.upsert(p);
    expect(await k.reconciler.waitForPod('static0hash', 0)).toBe(true);
    const t = kubeletParent(k.root, 'static0hash');
    expect(await k.reconciler.publish('static0hash', 'podinfo', t.target)).toBe(true);
    expect(readdirSync(t.dir)).toHaveLength(3);
  });

  it('an unpublish waits for a sync of the same directory in flight, and nothing comes back after it', async () => {
    // A writer whose next sync of the target blocks until released.
    const fsw = new FsVolumeWriter();
    let release: () => void = () => {};
    let gate: Promise<void> | undefined;
    const calls: string[] = [];
    const writer: VolumeWriter = {
      async sync(target, files, remove, opts) {
        calls.push(opts?.createTarget ? 'publish' : 'sync');
        if (gate && !opts?.createTarget) await gate;
        try {
          return await fsw.sync(target, files, remove, opts);
        } finally {
          calls.push('synced');
        }
      },
      async clear(target, names) {
        calls.push('clear');
        return fsw.clear(target, names);
      },
      stampOf: (target, name) => fsw.stampOf(target, name),
    };
    const root = tmpDir('kubelet-');
    const { log } = memoryLogger();
    const r = new Reconciler({
      kubeletRoot: root, writer, events: new RecordingEvents(), log, metrics: new AgentMetrics({ processMetrics: false }), csiDriver: DRIVER,
      dirs: (on) => new VolumeDirWatcher(root, on, () => {}),
    });
    try {
      const p: PodView = pod({ annotation: undefined, volumes: [csiVolume()], owners: [owner({ name: 'a' })] });
      const uid = p.metadata!.uid!;
      r.upsert(p);
      const t = kubeletParent(root, uid);
      expect(await r.publish(uid, 'podinfo', t.target)).toBe(true);
      await r.idle();
      gate = new Promise((res) => (release = res));
      calls.length = 0;
      r.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'b' })] } }); // a sync starts and blocks
      await waitFor(() => calls.includes('sync'));
      const unpublished = r.unpublish(uid, 'podinfo', t.target);
      release();
      expect(await unpublished).toEqual(expect.arrayContaining([FILES.ownerReferences]));
      await r.idle();
      expect(calls).toEqual(['sync', 'synced', 'clear']);
      expect(existsSync(t.dir)).toBe(false);
    } finally {
      release();
      await r.close();
    }
  });
});

describe('Reconciler with a late view of a deleted pod', () => {
  it('does not track again a pod the watch deleted, when a late view of it arrives (a CSI GET that lost the race)', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    const p = pod({ annotation: undefined, volumes: [csiVolume()] });
    k.reconciler.upsert(p);
    expect(await tracked(k)).toBe(1);
    k.reconciler.remove(p);
    k.reconciler.upsert(p);
    expect(await tracked(k)).toBe(0);
    expect(await k.reconciler.waitForPod(p.metadata!.uid!, 10)).toBe(false);
  });

  it('tracks again a pod a first state left out (its snapshot predates a CSI GET of the pod): its watch events still count', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    const p = pod({ annotation: undefined, volumes: [csiVolume()] });
    k.reconciler.upsert(p); // the publish's GET, fresher than the first state arriving next
    k.reconciler.replace([]);
    expect(await tracked(k)).toBe(0);
    k.reconciler.upsert(p); // the watch goes on from the snapshot: the pod's ADDED event
    expect(await tracked(k)).toBe(1);
    expect(await k.reconciler.waitForPod(p.metadata!.uid!, 10)).toBe(true);
  });
});

describe('Reconciler with a pod that claims another\'s directory before that pod arrives', () => {
  const VICTIM = '11111111-0000-4000-8000-00000000000a';
  const ATTACKER = '11111111-0000-4000-8000-00000000000b';

  it('tracks and publishes the real pod once it arrives: the claimant lets go of its directory first', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    k.reconciler.upsert(pod({ uid: ATTACKER, name: 'attacker', owners: [owner({ name: 'evil' })], annotations: { 'kubernetes.io/config.mirror': VICTIM } }));
    const victim = pod({ uid: VICTIM, name: 'victim', owners: [owner({ name: 'good' })], annotation: undefined, volumes: [csiVolume()] });
    k.reconciler.upsert(victim);
    expect(await k.reconciler.waitForPod(VICTIM, 100)).toBe(true);
    const t = kubeletParent(k.root, VICTIM);
    expect(await k.reconciler.publish(VICTIM, 'podinfo', t.target)).toBe(true);
    expect(readFileSync(path.join(t.dir, FILES.ownerReferences), 'utf8')).toContain('"name":"good"');
  });

  it('writes the real pod\'s owners into its emptyDir, not the claimant\'s', async () => {
    const k = agentKit();
    const dir = makeVolume(k.root, VICTIM);
    k.reconciler.upsert(pod({ uid: ATTACKER, name: 'attacker', owners: [owner({ name: 'evil' })], annotations: { 'kubernetes.io/config.mirror': VICTIM } }));
    k.reconciler.upsert(pod({ uid: VICTIM, name: 'victim', owners: [owner({ name: 'good' })] }));
    await k.reconciler.idle();
    await waitFor(() => readFileSync(path.join(dir, FILES.ownerReferences), 'utf8').includes('"name":"good"'));
    expect(readFileSync(path.join(dir, FILES.ownerReferences), 'utf8')).not.toContain('evil');
  });
});
