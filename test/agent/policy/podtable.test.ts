import { describe, expect, it } from 'vitest';
import { PodTable, dirOf } from '../../../agent/policy/podtable.ts';
import type { ResolvedVolume } from '../../../agent/volume/resolve.ts';

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
