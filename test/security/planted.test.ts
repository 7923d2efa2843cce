// Attack 1 (issue 5), the gaps left by test/agent/writer.test.ts: at every name the writer
// uses (final files and temporaries), plant a symlink to an outside directory, a dangling
// or relative symlink, a hard link to an outside file (even one that passes the writer's
// mode/size pre-check), a FIFO, or a directory. Nothing outside may change; the
// refusals are ProjectionErrors with a documented reason.
import { linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsVolumeWriter, TEMP_PREFIX, type VolumeTarget } from '../../agent/files/volume/writer.ts';
import { ALL_FILE_NAMES, FILES } from '../../projections/index.ts';
import { allFiles, owner, pod } from '../support/fixtures.ts';
import { makeVolume, tmpDir } from '../support/tmpdir.ts';
import { deepSnapshot, makeOutside, projectionError, WRITER_NAMES, type Outside } from './support.ts';

const UID = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee';
const writer = new FsVolumeWriter();
const want = allFiles(pod({ owners: [owner({ name: 'planted' })] }));
const bytesOf = (name: string) => want.find((f) => f.path === name)!.bytes;

function setup() {
  const base = tmpDir('sec-planted-');
  const root = path.join(base, 'kubelet');
  const vol = makeVolume(root, UID);
  const outside = makeOutside(base, bytesOf(FILES.ownerReferences).length);
  const target: VolumeTarget = { root, components: ['pods', UID, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'] };
  return { base, root, vol, outside, target, before: deepSnapshot(outside.dir) };
}

/** The files are in place: regular, 0644, ours, exact bytes; no temporary is left. */
function expectServed(vol: string, names: readonly string[] = ALL_FILE_NAMES) {
  for (const n of names) {
    const st = lstatSync(path.join(vol, n));
    expect(st.isFile() && st.nlink === 1 && (st.mode & 0o7777) === 0o644 && st.uid === process.getuid!()).toBe(true);
    expect(readFileSync(path.join(vol, n))).toEqual(bytesOf(n));
  }
}

const plants: { what: string; plant: (at: string, o: Outside) => void }[] = [
  { what: 'a symlink to an outside directory', plant: (at, o) => symlinkSync(o.subdir, at) },
  { what: 'a dangling symlink to an outside path', plant: (at, o) => symlinkSync(o.absent, at) },
  { what: 'a relative symlink to an outside file', plant: (at, o) => symlinkSync(path.relative(path.dirname(at), o.secret), at) },
  { what: 'a symlink to a symlink to an outside file', plant: (at, o) => symlinkSync(path.join(o.dir, 'link-to-secret'), at) },
  { what: 'a hard link to an outside 0600 file', plant: (at, o) => linkSync(o.secret, at) },
  { what: 'a hard link to an outside 0644 file of the wanted size', plant: (at, o) => linkSync(o.lookalike, at) },
  { what: 'a hard link to an outside FIFO', plant: (at, o) => linkSync(o.fifo, at) },
];

// verify: true checks what is on disk first (steps 2-3); verify: false (after a pod update, when
// the bytes are known to differ) skips them and meets a planted temporary at step 4 instead.
describe.each([{ verify: true }, { verify: false }])('a hostile entry planted at a name the writer uses (%o)', (mode) => {
  for (const { what, plant } of plants) {
    it.each(WRITER_NAMES)(`${what}, at %s: replaced or removed, nothing outside changes`, async (name) => {
      const { base, vol, outside, target, before } = setup();
      plant(path.join(vol, name), outside);
      await writer.sync(target, want, [], mode);
      expect(deepSnapshot(outside.dir)).toEqual(before);
      expectServed(vol);
      expect(readdirSync(vol).sort()).toEqual([...ALL_FILE_NAMES].sort());
      expect(readdirSync(base).sort()).toEqual(['kubelet', 'outside']);
    });
  }

  it.each(ALL_FILE_NAMES)('a directory at the temporary of %s: NameTaken for that file only, its content kept', async (name) => {
    const { vol, outside, target, before } = setup();
    const planted = path.join(vol, TEMP_PREFIX + name);
    mkdirSync(planted);
    writeFileSync(path.join(planted, 'inner'), 'pod data');
    const err = await projectionError(writer.sync(target, want, [], mode));
    expect(err.reason).toBe('NameTaken');
    expect(err.context.file).toBe(name);
    expect(err.message).toMatch(/directory occupies a name the agent uses/);
    expect(readFileSync(path.join(planted, 'inner'), 'utf8')).toBe('pod data');
    expectServed(vol, ALL_FILE_NAMES.filter((n) => n !== name));
    expect(deepSnapshot(outside.dir)).toEqual(before);
  });

  it('a directory at every name at once: every file refused, nothing written anywhere', async () => {
    const { base, vol, target } = setup();
    for (const n of WRITER_NAMES) mkdirSync(path.join(vol, n));
    const all = deepSnapshot(base);
    const err = await projectionError(writer.sync(target, want, [], mode));
    expect(err.reason).toBe('NameTaken');
    expect(deepSnapshot(base)).toEqual(all);
  });

  it('a turned-off file that is a hard link to an outside file: only the link goes, the outside file is intact', async () => {
    const { vol, outside, target } = setup();
    linkSync(outside.lookalike, path.join(vol, FILES.env));
    const only = want.filter((f) => f.path === FILES.ownerReferences);
    const before = deepSnapshot(outside.dir);
    const r = await writer.sync(target, only, [FILES.env, FILES.dependents], mode);
    expect(r.removed).toEqual([FILES.env]); // a root-owned regular file: indistinguishable from ours, and only a link
    expect(readdirSync(vol)).toEqual([FILES.ownerReferences]);
    // The outside file's content, mode and mtime are unchanged (its link count went back down).
    expect(deepSnapshot(outside.dir)).toEqual(before);
  });

  it('a turned-off file that is a symlink to an outside file or directory is left alone', async () => {
    const { vol, outside, target, before } = setup();
    symlinkSync(outside.secret, path.join(vol, FILES.env));
    symlinkSync(outside.subdir, path.join(vol, FILES.dependents));
    const r = await writer.sync(target, want.filter((f) => f.path === FILES.ownerReferences), [FILES.env, FILES.dependents], mode);
    expect(r.removed).toEqual([]);
    expect(lstatSync(path.join(vol, FILES.env)).isSymbolicLink()).toBe(true);
    expect(deepSnapshot(outside.dir)).toEqual(before);
  });
});
