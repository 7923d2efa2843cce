// Step 3a of the writer: files whose answer is not settled leave an agreeing file in place.
import { lstatSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsVolumeWriter, type VolumeTarget } from '../../../../agent/files/volume/writer.ts';
import type { KeepRule, ProjectedFile } from '../../../../projections/index.ts';
import { makeVolume, tmpDir } from '../../../support/tmpdir.ts';

const UID = '11111111-2222-4333-8444-555555555555';
const rule = (...prefixes: string[]): KeepRule => ({ group: 'g', prefixes: prefixes.map((p) => Buffer.from(p)) });
const f = (p: string, text: string, keep?: KeepRule): ProjectedFile => ({ path: p, bytes: Buffer.from(text), mode: 0o644, ...(keep ? { keep } : {}) });
// What an unsettled answer asks for, and the settled answer a previous sync left.
const unsettled = [f('a', 'A-pending', rule('A-', 'A!')), f('b', '[]', rule('[')), f('c', 'plain')];
const settled = [f('a', 'A-top'), f('b', '[x]'), f('c', 'plain')];

function setup() {
  const root = tmpDir();
  const vol = makeVolume(root, UID);
  const target: VolumeTarget = { root, components: ['pods', UID, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'], memory: true };
  return { vol, target };
}
const read = (vol: string, name: string) => readFileSync(path.join(vol, name), 'utf8');

describe('FsVolumeWriter: KeepRule (step 3a)', () => {
  it.each([{ verify: true }, { verify: false }])('leaves a group whose files all agree, with their stamps (verify: $verify)', async ({ verify }) => {
    const { vol, target } = setup();
    const writer = new FsVolumeWriter();
    const before = await writer.sync(target, settled);
    const inode = lstatSync(path.join(vol, 'a')).ino;
    const r = await writer.sync(target, unsettled, [], { verify });
    expect(read(vol, 'a')).toBe('A-top');
    expect(read(vol, 'b')).toBe('[x]');
    expect(lstatSync(path.join(vol, 'a')).ino).toBe(inode);
    expect(Object.fromEntries(Object.entries(r.kept).map(([k, v]) => [k, v.toString()]))).toEqual({ a: 'A-top', b: '[x]' });
    expect(r.stamps.a).toBe(before.stamps.a);
    expect(r.stamps.b).toBe(before.stamps.b);
    expect(r.written).toEqual(verify ? [] : ['c']); // a file without a rule is as ever
  });

  it.each([
    { what: 'one file of the group disagrees', spoil: (vol: string) => writeFileSync(path.join(vol, 'a'), 'B-top') },
    { what: 'one file of the group is missing', spoil: (vol: string) => rmSync(path.join(vol, 'b')) },
    { what: 'a file is shorter than its prefix', spoil: (vol: string) => writeFileSync(path.join(vol, 'a'), 'A') },
    { what: 'a symlink stands at a name', spoil: (vol: string) => { rmSync(path.join(vol, 'b')); symlinkSync('/etc/hostname', path.join(vol, 'b')); } },
  ])('writes the whole group when $what', async ({ spoil }) => {
    const { vol, target } = setup();
    const writer = new FsVolumeWriter();
    await writer.sync(target, settled);
    spoil(vol);
    const r = await writer.sync(target, unsettled);
    expect(read(vol, 'a')).toBe('A-pending');
    expect(read(vol, 'b')).toBe('[]');
    expect(lstatSync(path.join(vol, 'b')).isFile()).toBe(true);
    expect(r.kept).toEqual({});
  });

  it('keeps a derived file only when it is exactly what its rule makes of the other', async () => {
    const { vol, target } = setup();
    const writer = new FsVolumeWriter();
    const derive = (b: Buffer) => Buffer.from(`[${b.toString().slice(2)}]`); // 'A-top' -> '[top]'
    const wanting = [f('a', 'A-pending', rule('A-')), { ...f('b', '[]', rule('[')), keep: { ...rule('['), matches: { of: 'a', derive } } }];
    await writer.sync(target, [f('a', 'A-top'), f('b', '[top]')]);
    expect((await writer.sync(target, wanting)).kept).toHaveProperty('b');
    expect(read(vol, 'b')).toBe('[top]');
    // The chain moved on but the file beside it did not (a crash between the two renames): both go.
    await writer.sync(target, [f('a', 'A-new'), f('b', '[top]')]);
    expect((await writer.sync(target, wanting)).kept).toEqual({});
    expect([read(vol, 'a'), read(vol, 'b')]).toEqual(['A-pending', '[]']);
  });

  it('does not keep a derived file whose source is not in its group', async () => {
    const { vol, target } = setup();
    const writer = new FsVolumeWriter();
    await writer.sync(target, [f('a', 'A-top'), f('b', '[top]')]);
    const orphan = [f('a', 'A-top'), { ...f('b', '[]', rule('[')), keep: { ...rule('['), matches: { of: 'a', derive: () => Buffer.from('[top]') } } }];
    expect((await writer.sync(target, orphan)).kept).toEqual({}); // 'a' has no rule, so it is not read as part of the group
    expect(read(vol, 'b')).toBe('[]');
  });

  it('does not keep a file the agent does not own', async () => {
    const { vol, target } = setup();
    await new FsVolumeWriter().sync(target, settled);
    const other = new FsVolumeWriter({ uid: 4242 }); // the files were written by another uid
    await other.sync(target, unsettled);
    expect(read(vol, 'a')).toBe('A-pending');
  });
});
