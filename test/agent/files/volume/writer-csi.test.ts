// The writer's CSI steps on real directories: 1a (create the target, never its
// parents, refuse a symlink there) and 10-12 (remove only the agent's files, then the
// target itself).

import { chownSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProjectionError } from '../../../../agent/common/errors.ts';
import { FsVolumeWriter, TEMP_PREFIX, type VolumeTarget } from '../../../../agent/files/volume/writer.ts';
import { ALL_FILE_NAMES, FILES } from '../../../../projections/index.ts';
import { allFiles, owner, pod } from '../../../support/fixtures.ts';
import { snapshot, tmpDir } from '../../../support/tmpdir.ts';

const UID = '11111111-2222-4333-8444-555555555555';
const COMPONENTS = ['pods', UID, 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount'];
const files = () => allFiles(pod({ owners: [owner()] }));
const writer = new FsVolumeWriter();

/** A kubelet root where the kubelet has made the volume's directory (the target's parent), and an outside tree. */
function setup() {
  const base = tmpDir();
  const root = path.join(base, 'kubelet');
  const parent = path.join(root, ...COMPONENTS.slice(0, -1));
  mkdirSync(parent, { recursive: true, mode: 0o750 });
  const outside = path.join(base, 'outside');
  mkdirSync(outside);
  writeFileSync(path.join(outside, 'secret'), 'host data');
  const target: VolumeTarget = { root, components: COMPONENTS };
  return { base, root, parent, outside, target, dir: path.join(parent, 'mount') };
}

async function failure(p: Promise<unknown>): Promise<ProjectionError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProjectionError);
  return err as ProjectionError;
}

describe('FsVolumeWriter, CSI steps', () => {
  it('creates the target 0755 whatever the umask, and writes the files into it', async () => {
    const { target, dir } = setup();
    const old = process.umask(0o077);
    try {
      await writer.sync(target, files(), [], { createTarget: true });
    } finally {
      process.umask(old);
    }
    expect(statSync(dir).mode & 0o7777).toBe(0o755);
    expect(readdirSync(dir).sort()).toEqual([...ALL_FILE_NAMES].sort());
  });

  it('never creates the target\'s parents: without the kubelet\'s directory it is VolumeNotFound', async () => {
    const { base, root } = setup();
    const before = snapshot(base);
    const err = await failure(writer.sync({ root, components: ['pods', 'other-uid', 'volumes', 'kubernetes.io~csi', 'v', 'mount'] }, files(), [], { createTarget: true }));
    expect(err.reason).toBe('VolumeNotFound');
    expect(snapshot(base)).toEqual(before);
  });

  it.each([
    { what: 'a symlink to a directory', plant: (at: string, outside: string) => symlinkSync(outside, at) },
    { what: 'a dangling symlink', plant: (at: string, outside: string) => symlinkSync(path.join(outside, 'nowhere'), at) },
    { what: 'a regular file', plant: (at: string) => writeFileSync(at, 'x') },
  ])('refuses $what at the target and writes nothing anywhere', async ({ plant }) => {
    const { base, dir, outside, target } = setup();
    plant(dir, outside);
    const before = snapshot(base);
    const err = await failure(writer.sync(target, files(), [], { createTarget: true }));
    expect(err.reason).toBe('UnsafePath');
    expect(snapshot(base)).toEqual(before);
  });

  it('clear removes the agent\'s files and temporaries, then the target, and leaves the parent alone', async () => {
    const { parent, target } = setup();
    writeFileSync(path.join(parent, 'vol_data.json'), '{}');
    await writer.sync(target, files(), [], { createTarget: true });
    writeFileSync(path.join(parent, 'mount', TEMP_PREFIX + FILES.env), 'half');
    const r = await writer.clear(target, ALL_FILE_NAMES);
    expect(r.removed.sort()).toEqual([...ALL_FILE_NAMES].sort());
    expect(readdirSync(parent)).toEqual(['vol_data.json']);
  });

  it.each([
    { what: 'a file the agent did not write', plant: (dir: string) => writeFileSync(path.join(dir, 'other'), 'x'), left: ['other'] },
    { what: 'a file at an agent name owned by someone else', plant: (dir: string) => chownSync(path.join(dir, FILES.env), 4242, 4242), left: [FILES.env] },
    { what: 'a symlink at an agent name', plant: (dir: string, outside: string) => {
      rmSync(path.join(dir, FILES.env));
      symlinkSync(path.join(outside, 'secret'), path.join(dir, FILES.env));
    }, left: [FILES.env] },
  ])('clear leaves $what and reports NameTaken', async ({ plant, left }) => {
    const { dir, target, outside } = setup();
    await writer.sync(target, files(), [], { createTarget: true });
    plant(dir, outside);
    const outsideBefore = snapshot(outside);
    const err = await failure(writer.clear(target, ALL_FILE_NAMES));
    expect(err.reason).toBe('NameTaken');
    expect(readdirSync(dir).sort()).toEqual(left.sort());
    expect(snapshot(outside)).toEqual(outsideBefore);
  });

  it('clear with sweep removes every file of ours, nested ones and temporaries included, when the names are not known', async () => {
    const { parent, target, dir } = setup();
    await writer.sync(target, [...files(), { path: 'meta/deep/name', bytes: Buffer.from('x'), mode: 0o644 }, { path: 'labels', bytes: Buffer.from('y'), mode: 0o644 }], [], { createTarget: true });
    writeFileSync(path.join(dir, 'meta', TEMP_PREFIX + 'half'), 'half');
    const r = await writer.clear(target, ALL_FILE_NAMES, { sweep: true });
    expect(r.removed.sort()).toEqual([...ALL_FILE_NAMES, 'labels', 'meta/deep/name'].sort());
    expect(readdirSync(parent)).toEqual([]);
  });

  it.each([
    { what: 'a file owned by someone else', plant: (dir: string) => { writeFileSync(path.join(dir, 'meta', 'theirs'), 'x'); chownSync(path.join(dir, 'meta', 'theirs'), 4242, 4242); }, left: 'meta/theirs' },
    { what: 'a symlink to a directory outside', plant: (dir: string, outside: string) => symlinkSync(outside, path.join(dir, 'meta', 'link')), left: 'meta/link' },
    { what: 'a symlink to a file outside', plant: (dir: string, outside: string) => symlinkSync(path.join(outside, 'secret'), path.join(dir, 'meta', 'file-link')), left: 'meta/file-link' },
  ])('clear with sweep leaves $what (and everything through it), and reports NameTaken', async ({ plant, left }) => {
    const { target, dir, outside } = setup();
    await writer.sync(target, [...files(), { path: 'meta/name', bytes: Buffer.from('x'), mode: 0o644 }], [], { createTarget: true });
    plant(dir, outside);
    const outsideBefore = snapshot(outside);
    const err = await failure(writer.clear(target, ALL_FILE_NAMES, { sweep: true }));
    expect(err.reason).toBe('NameTaken');
    expect(readdirSync(dir)).toEqual(['meta']);
    expect(readdirSync(path.join(dir, 'meta'))).toEqual([left.split('/')[1]]);
    expect(snapshot(outside)).toEqual(outsideBefore);
  });

  it('clear refuses a symlink at the target and removes nothing through it', async () => {
    const { dir, outside, target } = setup();
    for (const n of ALL_FILE_NAMES) writeFileSync(path.join(outside, n), 'host');
    symlinkSync(outside, dir);
    const before = snapshot(outside);
    const err = await failure(writer.clear(target, ALL_FILE_NAMES));
    expect(err.reason).toBe('UnsafePath');
    expect(snapshot(outside)).toEqual(before);
  });

  it.each([
    { what: 'the target is gone', components: COMPONENTS },
    { what: 'the whole pod is gone', components: ['pods', 'gone', 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount'] },
  ])('clear succeeds with nothing to do when $what', async ({ components }) => {
    const { root } = setup();
    expect(await writer.clear({ root, components }, ALL_FILE_NAMES)).toEqual({ removed: [] });
  });

  it.each([[[]], [['pods', '..']], [['pods', 'a/b']]])('clear refuses the components %j', async (components) => {
    const { root } = setup();
    expect((await failure(writer.clear({ root, components }, ALL_FILE_NAMES))).reason).toBe('UnsafePath');
    expect(existsSync(root)).toBe(true);
  });
});
