// Attack 2 (issue 5): while the agent writes, a second process (race-attacker.ts) swaps
// the volume's entries between files, directories, FIFOs, and symlinks and hard links
// pointing outside, thousands of times. Nothing outside may change, the agent may only
// fail with a ProjectionError of a documented reason, and once the attacker stops (and
// removes the directories it planted, which the agent never deletes) the files converge.
import { lstatSync, readdirSync, readFileSync, rmdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProjectionError } from '../../agent/common/errors.ts';
import { FsVolumeWriter, TEMP_PREFIX, type VolumeTarget } from '../../agent/files/volume/writer.ts';
import { DEFAULT_PROJECTION_OPTIONS, FILES, project, type ProjectedFile } from '../../projections/index.ts';
import { agentKit } from '../support/agentkit.ts';
import { allFiles, owner, pod } from '../support/fixtures.ts';
import { makeVolume, tmpDir } from '../support/tmpdir.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { deepSnapshot, EVENT_REASONS, makeOutside, startAttacker, WRITER_NAMES } from './support.ts';

const ITERATIONS = 15_000;
// What a race inside the volume may legitimately cause: a planted entry where a file or
// temporary goes (NameTaken), a rename refused by what the attacker swapped in (WriteFailed),
// or the temporary unlinked by the attacker before our rename (ENOENT, reported as VolumeNotFound).
const RACE_REASONS = ['NameTaken', 'WriteFailed', 'VolumeNotFound'];

/** Everything under root except the volume itself (the pod's to scribble in). */
const besideVolume = (root: string, vol: string) =>
  Object.fromEntries(Object.entries(deepSnapshot(root)).filter(([p]) => p !== vol && !p.startsWith(vol + path.sep)));

/** The pod author gives up: removes the directories it planted at our names (the agent never deletes a directory). */
function removePlantedDirs(vol: string): void {
  for (const n of WRITER_NAMES) {
    const p = path.join(vol, n);
    if (!lstatSafe(p)?.isDirectory()) continue;
    try { unlinkSync(path.join(p, 'inner')); } catch { /* empty */ }
    rmdirSync(p);
  }
}
const lstatSafe = (p: string) => { try { return lstatSync(p); } catch { return undefined; } };

/** Among `names` (default: every name the writer can use), exactly `files` are there, each as written. */
function expectExactly(vol: string, files: readonly ProjectedFile[], names: readonly string[] = WRITER_NAMES): void {
  expect(readdirSync(vol).filter((n) => names.includes(n)).sort()).toEqual(files.map((f) => f.path).sort());
  for (const f of files) {
    const st = lstatSync(path.join(vol, f.path));
    expect({ file: f.path, regular: st.isFile(), mode: st.mode & 0o7777, uid: st.uid, links: st.nlink })
      .toEqual({ file: f.path, regular: true, mode: 0o644, uid: process.getuid!(), links: 1 });
    expect(readFileSync(path.join(vol, f.path))).toEqual(f.bytes);
  }
}

function setup(uid: string) {
  const base = tmpDir('sec-race-');
  const root = path.join(base, 'kubelet');
  const vol = makeVolume(root, uid);
  const outside = makeOutside(base, 150);
  return { base, root, vol, outside, before: deepSnapshot(outside.dir), beside: besideVolume(root, vol) };
}

describe('a pod racing the writer from another process', () => {
  it.each([1, 2])(`writer: ${ITERATIONS} swaps (seed %i) change nothing outside; failures are documented; it converges after`, async (seed) => {
    const uid = `race-${seed}`;
    const { base, root, vol, outside, before, beside } = setup(uid);
    const target: VolumeTarget = { root, components: ['pods', uid, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'] };
    const versions = [0, 1, 2].map((i) => allFiles(pod({ owners: [owner({ name: `gen-${i}-${'x'.repeat(i * 40)}` })] })));
    const outcomes: Record<string, number> = {};
    const strays: unknown[] = [];
    const attacker = await startAttacker(vol, outside, ITERATIONS, seed);
    let syncs = 0;
    while (!attacker.finished()) {
      try {
        // Both writer modes: verifying first (resync, directory events) and not (pod updates).
        await new FsVolumeWriter().sync(target, versions[syncs % versions.length]!, syncs % 7 === 0 ? [FILES.env] : [], { verify: syncs % 2 === 0 });
        outcomes.ok = (outcomes.ok ?? 0) + 1;
      } catch (err) {
        if (err instanceof ProjectionError) outcomes[err.reason] = (outcomes[err.reason] ?? 0) + 1;
        else strays.push(err);
      }
      syncs++;
    }
    const stats = await attacker.done;
    expect(stats.ops).toBe(ITERATIONS);
    expect(strays).toEqual([]);
    expect(Object.keys(outcomes).filter((r) => r !== 'ok' && !RACE_REASONS.includes(r))).toEqual([]);
    expect(syncs).toBeGreaterThan(10); // the two really overlapped (logged below for the record)
    expect(deepSnapshot(outside.dir)).toEqual(before);
    expect(besideVolume(root, vol)).toEqual(beside);
    expect(readdirSync(base).sort()).toEqual(['kubelet', 'outside']);
    console.log(`seed ${seed}: ${syncs} syncs during ${stats.ops} attacker ops`, JSON.stringify(outcomes), JSON.stringify(stats.byOp));

    // The attacker stopped. Whatever it left, a sync fixes every name not blocked by a directory...
    const final = versions[0]!;
    const blocked = WRITER_NAMES.filter((n) => lstatSafe(path.join(vol, n))?.isDirectory());
    const first = await new FsVolumeWriter().sync(target, final).then(() => undefined, (e: unknown) => e);
    if (blocked.length > 0) expect(first).toMatchObject({ reason: 'NameTaken' });
    else expect(first).toBeUndefined();
    // ...and once the pod removes its directories, the next sync converges exactly.
    removePlantedDirs(vol);
    await new FsVolumeWriter().sync(target, final);
    expectExactly(vol, final);
    expect(deepSnapshot(outside.dir)).toEqual(before);
  }, 60_000);

  it(`agent: self-heal under ${ITERATIONS} swaps reports only documented reasons, writes nothing outside, and converges`, async () => {
    const k = agentKit();
    const node = { name: 'node-1', uid: '0f0e0d0c-0000-4000-8000-000000000001' };
    k.reconciler.setNode(node); // every name the attacker plants is one the agent writes or removes
    const owners = (i: number) => [owner({ name: `heal-${i}` })];
    const p = pod({ owners: owners(0) });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    const outside = makeOutside(tmpDir('sec-race-outside-'), 150);
    const before = deepSnapshot(outside.dir);
    const beside = besideVolume(k.root, vol);
    k.reconciler.upsert(p);
    const attacker = await startAttacker(vol, outside, ITERATIONS, 7);
    // Owner churn while under attack, so the agent writes new bytes, not only self-heals.
    for (let i = 1; !attacker.finished(); i++) {
      k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: owners(i % 3) } });
      await new Promise((r) => setTimeout(r, 5));
    }
    await attacker.done;
    // The attacker is gone; its directories go too (the agent never deletes one: NameTaken until then).
    removePlantedDirs(vol);
    await k.reconciler.idle();
    expect(deepSnapshot(outside.dir)).toEqual(before);
    expect(besideVolume(k.root, vol)).toEqual(beside);
    const reasons = new Set(k.events.sent.map((e) => e.message.split(':')[0]!));
    expect([...reasons].filter((r) => !EVENT_REASONS.includes(r as never))).toEqual([]);
    expect(k.events.sent.every((e) => e.reason === 'OwnerRefsProjectionFailed' && e.obj.uid === p.metadata!.uid)).toBe(true);

    // The next resync (periodic in the agent) converges.
    const final = { ...p, metadata: { ...p.metadata, ownerReferences: owners(9) } };
    k.reconciler.upsert(final);
    k.reconciler.resyncAll();
    const want = project(final, DEFAULT_PROJECTION_OPTIONS, { node });
    // The names this agent writes here, and their temporaries: what it planted at names the
    // node does not use (controllerChain with owners not followed) is the pod's own business.
    const managed = want.flatMap((f) => [f.path, TEMP_PREFIX + f.path]);
    await waitFor(() => {
      try { expectExactly(vol, want, managed); return true; } catch { return false; }
    }, { timeoutMs: 30_000, describe: 'files converge after the attack' });
    expectExactly(vol, want, managed);
  }, 60_000);
});
