import { execFileSync } from 'node:child_process';
import { chownSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { ProjectionError } from '../../../../agent/common/errors.ts';
import { inlineOps, threadPoolOps, type FsOps } from '../../../../agent/files/volume/fsops.ts';
import { FsVolumeWriter, TEMP_PREFIX, type VolumeTarget } from '../../../../agent/files/volume/writer.ts';
import { ALL_FILE_NAMES, FILES } from '../../../../projections/index.ts';
import { allFiles, owner, pod } from '../../../support/fixtures.ts';
import { startReader } from '../../../support/reader.ts';
import { makeVolume, snapshot, tmpDir } from '../../../support/tmpdir.ts';

const UID = '11111111-2222-4333-8444-555555555555';
// Every test runs twice: with the thread-pool calls (disk-backed volume) and inline (tmpfs).
let memory = false;
const target = (root: string, name = 'podinfo'): VolumeTarget => ({
  root, components: ['pods', UID, 'volumes', 'kubernetes.io~empty-dir', name], memory,
});
const files = (name = 'owner') => allFiles(pod({ owners: [owner({ name })] }));
const writer = new FsVolumeWriter();

async function syncError(p: Promise<unknown>): Promise<ProjectionError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProjectionError);
  return err as ProjectionError;
}

/** A root with a volume and, beside it, an "outside" file a hostile pod would love to hit. */
function setup() {
  const base = tmpDir();
  const root = path.join(base, 'kubelet');
  const vol = makeVolume(root, UID);
  const outside = path.join(base, 'outside');
  mkdirSync(outside);
  writeFileSync(path.join(outside, 'secret'), 'host data');
  return { base, root, vol, outside };
}

describe.each([{ memory: false }, { memory: true }])('FsVolumeWriter (memory-backed: $memory)', (mode) => {
  beforeEach(() => {
    memory = mode.memory;
  });

  it('writes every file 0644 with the exact bytes and leaves no temporary behind', async () => {
    const { root, vol } = setup();
    const want = files();
    const r = await writer.sync(target(root), want);
    expect(r.written.sort()).toEqual([...ALL_FILE_NAMES].sort());
    expect(readdirSync(vol).sort()).toEqual([...ALL_FILE_NAMES].sort());
    for (const f of want) {
      expect(readFileSync(path.join(vol, f.path))).toEqual(f.bytes);
      expect(statSync(path.join(vol, f.path)).mode & 0o7777).toBe(0o644);
    }
  });

  it('does not rewrite when bytes are unchanged', async () => {
    const { root, vol } = setup();
    await writer.sync(target(root), files());
    const inode = statSync(path.join(vol, FILES.ownerReferences)).ino;
    const r = await writer.sync(target(root), files());
    expect(r.written).toEqual([]);
    expect(r.unchanged).toHaveLength(files().length);
    expect(statSync(path.join(vol, FILES.ownerReferences)).ino).toBe(inode);
  });

  it.each([
    { what: 'deleted', spoil: (p: string) => rmSync(p) },
    { what: 'overwritten with other bytes', spoil: (p: string) => writeFileSync(p, 'tampered') },
    { what: 'blanked', spoil: (p: string) => writeFileSync(p, '') },
    { what: 'made writable', spoil: (p: string) => execFileSync('chmod', ['666', p]) },
    { what: 'replaced by a file the pod owns', spoil: (p: string) => chownSync(p, 4242, 4242) },
  ])('restores a file the pod $what', async ({ spoil }) => {
    const { root, vol } = setup();
    const want = files();
    await writer.sync(target(root), want);
    const p = path.join(vol, FILES.ownerReferences);
    spoil(p);
    const r = await writer.sync(target(root), want);
    expect(r.written).toEqual([FILES.ownerReferences]);
    expect(readFileSync(p)).toEqual(want.find((f) => f.path === FILES.ownerReferences)!.bytes);
    expect(lstatSync(p).uid).toBe(process.getuid!());
  });

  it('never shows a reader a torn, empty or missing file across many updates', async () => {
    const { root, vol } = setup();
    const versions = Array.from({ length: 300 }, (_, i) => files(`gen-${i}-${'x'.repeat(i * 7)}`));
    await writer.sync(target(root), versions[0]!);
    const allowed = Object.fromEntries(ALL_FILE_NAMES.map((n) => [
      path.join(vol, n), versions.map((v) => v.find((f) => f.path === n)!.bytes.toString('utf8')),
    ]));
    const reader = await startReader(allowed);
    for (const v of versions.slice(1)) await writer.sync(target(root), v);
    const stats = await reader.stop();
    expect(stats.reads).toBeGreaterThan(0);
    expect(stats).toMatchObject({ missing: 0, torn: 0 });
  });

  const names = [...ALL_FILE_NAMES, ...ALL_FILE_NAMES.map((n) => TEMP_PREFIX + n)];
  it.each(names)('does not follow a symlink planted at %s', async (name) => {
    const { base, root, vol, outside } = setup();
    symlinkSync(path.join(outside, 'secret'), path.join(vol, name));
    const before = snapshot(outside);
    await writer.sync(target(root), files());
    expect(snapshot(outside)).toEqual(before);
    for (const n of ALL_FILE_NAMES) expect(lstatSync(path.join(vol, n)).isFile()).toBe(true);
    expect(readdirSync(base).sort()).toEqual(['kubelet', 'outside']);
  });

  it('reports NameTaken for a directory at a file name and still writes the other files', async () => {
    const { root, vol, outside } = setup();
    mkdirSync(path.join(vol, FILES.env));
    writeFileSync(path.join(vol, FILES.env, 'inner'), 'x');
    const before = snapshot(outside);
    const err = await syncError(writer.sync(target(root), files()));
    expect(err.reason).toBe('NameTaken');
    expect(err.context.file).toBe(FILES.env);
    expect(lstatSync(path.join(vol, FILES.ownerReferences)).isFile()).toBe(true);
    expect(lstatSync(path.join(vol, FILES.dependents)).isFile()).toBe(true);
    expect(readFileSync(path.join(vol, FILES.env, 'inner'), 'utf8')).toBe('x');
    expect(snapshot(outside)).toEqual(before);
  });

  it('replaces a FIFO planted at a file name without blocking on it', async () => {
    const { root, vol } = setup();
    execFileSync('mkfifo', [path.join(vol, FILES.ownerReferences)]);
    await writer.sync(target(root), files());
    expect(lstatSync(path.join(vol, FILES.ownerReferences)).isFile()).toBe(true);
  });

  it.each([
    { where: 'the volume directory', at: (root: string) => path.join(root, 'pods', UID, 'volumes', 'kubernetes.io~empty-dir', 'podinfo') },
    { where: 'the pod directory', at: (root: string) => path.join(root, 'pods', UID) },
    { where: 'the pods directory', at: (root: string) => path.join(root, 'pods') },
  ])('refuses a symlink at $where and writes nothing outside', async ({ at }) => {
    const { base, root, outside } = setup();
    const link = at(root);
    rmSync(link, { recursive: true });
    // Point the link at a tree that has the rest of the path, so following it would succeed.
    const decoy = path.join(outside, 'decoy');
    mkdirSync(path.join(decoy, path.relative(link, path.join(root, 'pods', UID, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'))), { recursive: true });
    symlinkSync(decoy, link);
    const before = snapshot(base);
    const err = await syncError(writer.sync(target(root), files()));
    expect(err.reason).toBe('UnsafePath');
    expect(snapshot(base)).toEqual(before);
  });

  it('reports VolumeNotFound and creates nothing when the kubelet has not made the directory', async () => {
    const { base, root } = setup();
    const before = snapshot(base);
    const err = await syncError(writer.sync(target(root, 'other'), files()));
    expect(err.reason).toBe('VolumeNotFound');
    expect(snapshot(base)).toEqual(before);
  });

  it('removes temporaries left by a crash', async () => {
    const { root, vol } = setup();
    for (const n of ALL_FILE_NAMES) writeFileSync(path.join(vol, TEMP_PREFIX + n), 'half-writ');
    await writer.sync(target(root), files());
    expect(readdirSync(vol).sort()).toEqual([...ALL_FILE_NAMES].sort());
  });

  it('removes a turned-off file it owns, but not one the pod owns or a directory', async () => {
    const { root, vol } = setup();
    await writer.sync(target(root), files());
    const only = () => files().filter((f) => f.path === FILES.ownerReferences);
    let r = await writer.sync(target(root), only(), [FILES.env]);
    expect(r.removed).toEqual([FILES.env]);
    expect(readdirSync(vol).sort()).toEqual(ALL_FILE_NAMES.filter((n) => n !== FILES.env).sort());
    chownSync(path.join(vol, FILES.dependents), 4242, 4242);
    mkdirSync(path.join(vol, FILES.env));
    r = await writer.sync(target(root), only(), [FILES.env, FILES.dependents]);
    expect(r.removed).toEqual([]);
    expect(readdirSync(vol).sort()).toEqual([...ALL_FILE_NAMES].sort());
  });

  it.each(['..', '.', 'a/b', '', 'x\0y'])('refuses the path component %j', async (c) => {
    const { root } = setup();
    const err = await syncError(writer.sync({ root, components: ['pods', c] }, files()));
    expect(err.reason).toBe('UnsafePath');
  });
});

describe('FsVolumeWriter against a temporary swapped between close and rename', () => {
  it.each([{ memory: false }, { memory: true }])('detects it by inode, reports NameTaken, follows nothing, and the next sync heals (memory: $memory)', async ({ memory: m }) => {
    const { root, vol, outside } = setup();
    // The seam lets the test act exactly in the window: just before the rename, the "pod"
    // replaces the agent's closed temporary with a symlink to a host file.
    const swap = (ops: FsOps): FsOps => ({
      ...ops,
      async rename(from, to) {
        if (path.basename(from).startsWith(TEMP_PREFIX) && path.basename(to) === FILES.ownerReferences) {
          rmSync(from);
          symlinkSync(path.join(outside, 'secret'), from);
        }
        return ops.rename(from, to);
      },
    });
    const attacked = new FsVolumeWriter({ ops: { memory: swap(inlineOps), disk: swap(threadPoolOps) } });
    const t = { ...target(root), memory: m };
    const err = await syncError(attacked.sync(t, files()));
    expect(err).toMatchObject({ reason: 'NameTaken', context: { file: FILES.ownerReferences } });
    expect(readFileSync(path.join(outside, 'secret'), 'utf8')).toBe('host data'); // nothing written through it
    await new FsVolumeWriter().sync(t, files());
    expect(lstatSync(path.join(vol, FILES.ownerReferences)).isFile()).toBe(true);
    expect(readFileSync(path.join(vol, FILES.ownerReferences), 'utf8')).toBe(files().find((f) => f.path === FILES.ownerReferences)!.bytes.toString());
  });
});

describe('FsVolumeWriter: a file created with its mode, or fchmod-ed when the umask would strip it', () => {
  /** Counts fchmod calls through the ops seam. */
  const counting = () => {
    let chmods = 0;
    const wrap = (ops: FsOps): FsOps => ({
      ...ops,
      async open(p, flags, mode) {
        const fh = await ops.open(p, flags, mode);
        return { ...fh, fd: fh.fd, chmod: async (m: number) => { chmods++; await fh.chmod(m); } };
      },
    });
    return { ops: { memory: wrap(inlineOps), disk: wrap(threadPoolOps) }, chmods: () => chmods };
  };
  const processUmask = parseInt(/^Umask:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]!, 8);

  // The writer is told the process umask, a stricter one (it then only does more), or none.
  it.each(([
    [0o644, 'process'], [0o400, 'process'], [0o755, 'process'], [0o666, 'process'], [0o777, 'process'],
    [0o644, 'stricter'], [0o400, 'stricter'], [0o644, 'unknown'],
  ] as const).map(([m, told]) => [m.toString(8), m, told] as const))('mode %s, umask %s: the exact mode, and fchmod only where the umask strips a bit', async (_octal, fileMode, told) => {
    const { root, vol } = setup();
    const c = counting();
    const umask = told === 'process' ? processUmask : told === 'stricter' ? processUmask | 0o077 : null;
    const w = new FsVolumeWriter({ ops: c.ops, umask });
    await w.sync({ ...target(root), memory: true }, [{ path: 'item', bytes: Buffer.from('x'), mode: fileMode }]);
    expect(statSync(path.join(vol, 'item')).mode & 0o7777).toBe(fileMode);
    expect(c.chmods()).toBe(umask === null || (fileMode & umask) !== 0 ? 1 : 0);
  });

  it('skips fchmod for the agent\'s own 0644 files under the usual umask', async () => {
    const { root } = setup();
    const c = counting();
    await new FsVolumeWriter({ ops: c.ops, umask: 0o022 }).sync({ ...target(root), memory: true }, files());
    expect(c.chmods()).toBe(0);
  });

  it('reads the process umask itself: a mode the umask strips still comes out exact', async () => {
    const { root, vol } = setup();
    const modes = [0o666, 0o777, 0o644, 0o602];
    await new FsVolumeWriter().sync({ ...target(root), memory: true }, modes.map((mode, i) => ({ path: `f${i}`, bytes: Buffer.from('x'), mode })));
    expect(modes.map((_m, i) => statSync(path.join(vol, `f${i}`)).mode & 0o7777)).toEqual(modes);
  });
});
