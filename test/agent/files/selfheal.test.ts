import { describe, expect, it } from 'vitest';
import { filesTurnedOff } from '../../../agent/files/admission.ts';
import { DEFAULT_SETTINGS } from '../../../agent/node/nodeconfig.ts';
import { PodTable, dirOf } from '../../../agent/files/podtable.ts';
import { SelfHeal } from '../../../agent/files/selfheal.ts';
import { DirLocks } from '../../../agent/files/volume/dirlocks.ts';
import type { ResolvedVolume } from '../../../agent/files/volume/resolve.ts';
import { FILES, project } from '../../../projections/index.ts';
import { HEAL_LIMIT } from '../../../agent/common/defaults.ts';
import { FakeClock } from '../../support/clock.ts';

const vol: ResolvedVolume = { name: 'podinfo', target: { root: '/k/pods', components: ['disk-a', 'volumes', 'kubernetes.io~empty-dir', 'podinfo'] } };
const dir = dirOf(vol.target);
const files = project({ metadata: { ownerReferences: [] } });
const stamps = Object.fromEntries(files.map((f, i) => [f.path, `ino${i}:1:1`]));

/**
 * One tracked pod whose volume was synced and left these stamps, its verification requests
 * consumed; the disk answers `onDisk` for each name.
 */
function healing(onDisk: Record<string, string | null>, opts: { retrying?: boolean; clock?: FakeClock } = {}) {
  const table = new PodTable({
    dirs: { watch() {}, unwatch() {}, close: async () => {} },
    metrics: { podsTracked: { set() {} }, volumesTracked: { inc() {}, dec() {} } } as never,
  });
  const t = table.track('a', { kind: 'Pod', name: 'a', namespace: 'ns', uid: 'a' }, 'disk-a');
  table.setVolumes('a', t, [vol], []);
  table.setFiles(t, files, [], 0);
  table.synced(t, vol.name, t.fingerprint, files, stamps);
  table.takeVerify(t, vol.name);
  const queued: string[] = [];
  const later: string[] = [];
  const lstats = { n: 0 };
  const locks = new DirLocks();
  const heal = new SelfHeal({
    table: () => table, locks, clock: opts.clock ?? new FakeClock(),
    queue: { add: (uid: string) => void queued.push(uid), addIfIdle: (uid: string) => void queued.push(uid), addAfter: (uid: string) => void later.push(uid), retrying: () => opts.retrying ?? false },
    writer: { stampOf: async (_target, name) => { lstats.n++; return onDisk[name] ?? undefined; } },
  });
  /** Settled: the checks noted events schedule have run, each under the directory's lock. */
  const settled = async () => {
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setImmediate(r));
      await locks.run(dir, async () => {});
    }
  };
  return { heal, table, t, locks, queued, later, lstats, settled };
}

describe('SelfHeal', () => {
  it.each([
    { what: "the agent's own rename (the stamp its write left)", name: FILES.ownerReferences, disk: stamps[FILES.ownerReferences]!, verified: false },
    { what: 'a file the pod replaced (another inode)', name: FILES.ownerReferences, disk: 'ino99:1:1', verified: true },
    { what: 'a file the pod deleted', name: FILES.env, disk: null, verified: true },
    { what: 'a file the pod rewrote in place (another size and mtime)', name: FILES.dependents, disk: `${stamps[FILES.dependents]!.split(':')[0]}:7:2`, verified: true },
    { what: 'a name the agent does not keep there', name: 'notes.txt', disk: null, verified: false },
  ])('on a directory event for $what: verified and queued = $verified', async ({ name, disk, verified }) => {
    const { heal, t, queued, settled } = healing({ [name]: disk });
    heal.changed(dir, name);
    await settled();
    expect(queued).toEqual(verified ? ['a'] : []);
    expect(t.verify.has(vol.name)).toBe(verified);
  });

  it('judges an event for a rename still in flight after that sync has recorded its stamps (the directory lock)', async () => {
    const next = 'ino42:1:2';
    const { heal, table, t, locks, queued, settled } = healing({ [FILES.ownerReferences]: next });
    // A sync holds the lock; its rename's event arrives before it records the new stamp.
    await locks.run(dir, async () => {
      heal.changed(dir, FILES.ownerReferences);
      table.synced(t, vol.name, t.fingerprint, files, { ...stamps, [FILES.ownerReferences]: next });
    });
    await settled();
    expect(queued).toEqual([]);
  });

  it('ignores events for directories it does not track', async () => {
    const { heal, queued, settled } = healing({});
    heal.changed('/k/pods/other/volumes/kubernetes.io~empty-dir/podinfo', FILES.ownerReferences);
    heal.appeared('/k/pods/other/volumes/kubernetes.io~empty-dir/podinfo');
    await settled();
    expect(queued).toEqual([]);
  });

  it('verifies a directory that appeared unless its ownerReferences file is the one the agent wrote', async () => {
    const intact = healing({ [FILES.ownerReferences]: stamps[FILES.ownerReferences]! });
    intact.heal.appeared(dir);
    await intact.settled();
    expect(intact.queued).toEqual([]);
    const fresh = healing({}); // recreated: nothing of ours there
    fresh.heal.appeared(dir);
    await fresh.settled();
    expect(fresh.queued).toEqual(['a']);
  });

  it('notes a flood of events and returns: one check per directory at a time, however many events (a pod rewriting a file in a loop)', async () => {
    const { heal, queued, lstats, settled } = healing({ [FILES.ownerReferences]: 'ino99:1:1' });
    for (let i = 0; i < 10_000; i++) heal.changed(dir, FILES.ownerReferences);
    expect(lstats.n).toBe(0); // nothing judged inside the watcher's event delivery
    await settled();
    expect(lstats.n).toBe(1);
    expect(queued).toEqual(['a']);
  });

  it(`repairs a pod that keeps undoing the agent's files at most ${HEAL_LIMIT.burst} times at once, then once per ${HEAL_LIMIT.refillMs} ms`, async () => {
    const clock = new FakeClock();
    const { heal, queued, later, settled } = healing({ [FILES.ownerReferences]: 'ino99:1:1' }, { clock });
    for (let i = 0; i < HEAL_LIMIT.burst + 3; i++) {
      heal.changed(dir, FILES.ownerReferences);
      await settled();
    }
    expect(queued).toHaveLength(HEAL_LIMIT.burst);
    expect(later).toHaveLength(3); // put off to the next token, not dropped
    clock.advance(HEAL_LIMIT.refillMs);
    heal.changed(dir, FILES.ownerReferences);
    await settled();
    expect(queued).toHaveLength(HEAL_LIMIT.burst + 1);
  });

  it('leaves a pod waiting out a failure\'s backoff to its retry (marked for verification, not queued early)', async () => {
    const { heal, t, queued, later, lstats, settled } = healing({ [FILES.env]: null }, { retrying: true });
    heal.changed(dir, FILES.env);
    await settled();
    expect([queued, later]).toEqual([[], []]);
    expect(t.verify.has(vol.name)).toBe(true);
    const judged = lstats.n;
    for (let i = 0; i < 100; i++) heal.changed(dir, FILES.env);
    await settled();
    expect(lstats.n).toBe(judged); // the repair is asked for and timed already: nothing more to judge
  });

  it('on a resync, marks every tracked volume for verification and queues its pod', () => {
    const { heal, t, queued } = healing({});
    heal.resyncAll();
    expect(queued).toEqual(['a']);
    expect([...t.verify]).toEqual([vol.name]);
  });
});

describe('filesTurnedOff', () => {
  it.each([
    { what: 'the defaults', s: {}, off: [FILES.chain, FILES.workload] },
    { what: 'following owners', s: { followOwners: true }, off: [] },
    { what: 'no env, dependents or node file', s: { envFile: false, dependentsFile: false, nodeFile: false }, off: [FILES.env, FILES.dependents, FILES.node, FILES.chain, FILES.workload] },
  ])('$what', ({ s, off }) => {
    expect(filesTurnedOff({ ...DEFAULT_SETTINGS, ...s })).toEqual(off);
  });
});
