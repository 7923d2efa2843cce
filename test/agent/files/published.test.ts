// PublishedTargets on its own: a pod table with recorded directory watches, a scripted
// writer, and a clock driven by hand.
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../../agent/common/clock.ts';
import { ProjectionError } from '../../../agent/common/errors.ts';
import { AgentMetrics } from '../../../agent/monitoring/metrics.ts';
import { PodTable, dirOf, type Tracked } from '../../../agent/files/podtable.ts';
import { PublishedTargets } from '../../../agent/files/published.ts';
import { VolumeSync } from '../../../agent/files/volumesync.ts';
import { DirLocks } from '../../../agent/files/volume/dirlocks.ts';
import type { SyncResult, VolumeTarget, VolumeWriter } from '../../../agent/files/volume/writer.ts';
import { project } from '../../../projections/index.ts';

const target = (disk: string, volume = 'podinfo'): VolumeTarget =>
  ({ root: '/k', components: ['pods', disk, 'volumes', 'kubernetes.io~csi', volume, 'mount'] });

function setup(opts: { fail?: ProjectionError } = {}) {
  const timers: { at: number; fn: () => void }[] = [];
  let now = 0;
  const clock: Clock = {
    now: () => now,
    setTimer(fn, ms) {
      const t = { at: now + ms, fn };
      timers.push(t);
      return () => timers.splice(timers.indexOf(t), 1);
    },
  };
  const advance = (ms: number) => {
    now += ms;
    for (const t of timers.filter((x) => x.at <= now)) t.fn();
  };
  const metrics = new AgentMetrics({ processMetrics: false });
  const watched = new Set<string>();
  const table = new PodTable({ dirs: { watch: (d) => watched.add(d), unwatch: (d) => watched.delete(d), close: async () => {} }, metrics });
  const calls: string[] = [];
  const writer: VolumeWriter = {
    async sync(t, _files, _remove, o): Promise<SyncResult> {
      calls.push(`sync ${t.components[1]} create=${o?.createTarget ?? false}`);
      if (opts.fail) throw opts.fail;
      return { written: ['ownerReferences'], unchanged: [], removed: [], kept: {}, stamps: { ownerReferences: 's1' } };
    },
    async clear(t) {
      calls.push(`clear ${t.components[1]}`);
      return { removed: ['ownerReferences'] };
    },
    stampOf: async () => undefined,
  };
  const locks = new DirLocks();
  const reports: string[] = [];
  const published = new PublishedTargets({
    table, writer, locks, clock, removals: () => [],
    sync: new VolumeSync({ table, writer, locks, metrics, clock }),
    report: (_t, e) => reports.push(`${e.reason} ${e.context.volume}`),
  });
  const track = (uid: string, disk = uid): Tracked => {
    const t = table.track(uid, { kind: 'Pod', name: uid, namespace: 'ns', uid }, disk);
    table.setFiles(t, project({ metadata: { ownerReferences: [] } }), [], 0);
    return t;
  };
  return { table, published, watched, calls, reports, track, advance };
}

describe('PublishedTargets', () => {
  it('waitForPod answers at once for a tracked pod, on arrival for a coming one, and false after the wait', async () => {
    const s = setup();
    s.track('a');
    expect(await s.published.waitForPod('a', 1_000)).toBe(true);
    const coming = s.published.waitForPod('b', 1_000);
    s.track('b');
    s.published.arrived('b');
    expect(await coming).toBe(true);
    const never = s.published.waitForPod('c', 1_000);
    s.advance(1_000);
    expect(await never).toBe(false);
  });

  it('close() releases every waiter with false', async () => {
    const s = setup();
    const waiting = s.published.waitForPod('x', 60_000);
    s.published.close();
    expect(await waiting).toBe(false);
  });

  it('publish writes the target (creating its directory) and keeps it among the pod volumes, watched', async () => {
    const s = setup();
    const t = s.track('a');
    expect(await s.published.publish('a', 'podinfo', target('a'))).toBe(true);
    expect(s.calls).toEqual(['sync a create=true']);
    expect(s.published.has('a')).toBe(true);
    expect(t.volumes.map((v) => v.name)).toEqual(['podinfo']);
    expect(s.watched.has(dirOf(target('a')))).toBe(true);
    expect(t.synced.get('podinfo')).toBe(t.fingerprint);
    expect(t.stamps.get('podinfo')).toEqual({ ownerReferences: 's1' });
  });

  it('publish answers false for an untracked pod and touches nothing', async () => {
    const s = setup();
    expect(await s.published.publish('ghost', 'podinfo', target('ghost'))).toBe(false);
    expect(s.calls).toEqual([]);
    expect(s.published.has('ghost')).toBe(false);
  });

  it('a failed publish is reported on the pod and leaves no target behind, so the retry starts clean', async () => {
    const s = setup({ fail: new ProjectionError('UnsafePath', 'mount is a symlink') });
    const t = s.track('a');
    await expect(s.published.publish('a', 'podinfo', target('a'))).rejects.toMatchObject({ reason: 'UnsafePath', context: { volume: 'podinfo', pod: 'ns/a' } });
    expect(s.reports).toEqual(['UnsafePath podinfo']);
    expect(s.published.has('a')).toBe(false);
    expect(t.volumes).toEqual([]);
    expect(s.watched.size).toBe(0);
  });

  it('a failed re-publish keeps a target that was already kept current', async () => {
    const s = setup({ fail: new ProjectionError('WriteFailed', 'EIO') });
    const t = s.track('a');
    s.published.adopt('a', 'podinfo', target('a'));
    await expect(s.published.publish('a', 'podinfo', target('a'))).rejects.toMatchObject({ reason: 'WriteFailed' });
    expect(t.volumes.map((v) => v.name)).toEqual(['podinfo']);
  });

  it('publish refuses, without writing, a pod whose files are refused', async () => {
    const s = setup();
    const t = s.track('a');
    s.table.setView(t, {}, new ProjectionError('TooLarge', 'too large'));
    await expect(s.published.publish('a', 'podinfo', target('a'))).rejects.toMatchObject({ reason: 'TooLarge', context: { volume: 'podinfo' } });
    expect(s.calls).toEqual([]);
  });

  it('adopt keeps a target current without writing; unpublish drops it first, then clears it', async () => {
    const s = setup();
    const t = s.track('static', 'hash0');
    s.published.adopt('hash0', 'podinfo', target('hash0'));
    expect(s.calls).toEqual([]);
    expect(t.volumes.map((v) => v.name)).toEqual(['podinfo']);
    expect(await s.published.unpublish('hash0', 'podinfo', target('hash0'))).toEqual(['ownerReferences']);
    expect(s.calls).toEqual(['clear hash0']);
    expect(t.volumes).toEqual([]);
    expect(s.published.has('hash0')).toBe(false);
  });
});

describe('PublishedTargets when publishes overlap', () => {
  it('a failed first publish does not drop the target a retried publish adopted meanwhile', async () => {
    const s = setup();
    const t = s.track('a');
    // The first publish's write hangs, then fails; the kubelet retries after its deadline.
    let failFirst!: () => void;
    let calls = 0;
    const writer: VolumeWriter = {
      sync: () => (++calls === 1
        ? new Promise<SyncResult>((_r, reject) => { failFirst = () => reject(new ProjectionError('WriteFailed', 'EIO')); })
        : Promise.resolve({ written: [], unchanged: ['ownerReferences'], removed: [], kept: {}, stamps: {} })),
      clear: async () => ({ removed: [] }),
      stampOf: async () => undefined,
    };
    const locks = new DirLocks();
    const metrics = new AgentMetrics({ processMetrics: false });
    const clock: Clock = { now: () => 0, setTimer: () => () => {} };
    const published = new PublishedTargets({ table: s.table, writer, locks, clock, removals: () => [], report: () => {},
      sync: new VolumeSync({ table: s.table, writer, locks, metrics, clock }) });
    const first = published.publish('a', 'podinfo', target('a'));
    await new Promise((r) => setTimeout(r, 5));
    const second = published.publish('a', 'podinfo', target('a')); // waits on the directory lock
    failFirst();
    await expect(first).rejects.toMatchObject({ reason: 'WriteFailed' });
    expect(await second).toBe(true);
    expect(published.has('a')).toBe(true);
    expect(t.volumes.map((v) => v.name)).toEqual(['podinfo']);
  });
});
