// Nested item paths (downwardAPI items like "meta/labels"): step 1b walks and makes the
// directories below the target one component at a time, O_NOFOLLOW; step 11a removes
// them again. A symlink or file planted where a directory belongs is refused, and
// nothing outside the target is ever written or removed.

import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProjectionError } from '../../../../agent/common/errors.ts';
import { FsVolumeWriter, type VolumeTarget } from '../../../../agent/files/volume/writer.ts';
import { inlineOps, threadPoolOps, type FsOps } from '../../../../agent/files/volume/fsops.ts';
import type { ProjectedFile } from '../../../../projections/index.ts';
import { tmpDir } from '../../../support/tmpdir.ts';

const writer = new FsVolumeWriter();
const file = (p: string, text = p, mode = 0o644): ProjectedFile => ({ path: p, bytes: Buffer.from(text), mode });

function setup() {
  const base = tmpDir();
  const root = path.join(base, 'kubelet');
  mkdirSync(path.join(root, 'vol'), { recursive: true });
  const outside = path.join(base, 'outside');
  mkdirSync(outside);
  const target: VolumeTarget = { root, components: ['vol', 'mount'] };
  return { target, dir: path.join(root, 'vol', 'mount'), outside };
}

describe('FsVolumeWriter, nested item paths', () => {
  it('makes the directories 0755 and writes each file with its own mode', async () => {
    const { target, dir } = setup();
    const r = await writer.sync(target, [file('a'), file('x/y/z', 'deep', 0o600), file('x/w')], [], { createTarget: true });
    expect(r.written.sort()).toEqual(['a', 'x/w', 'x/y/z']);
    expect(readFileSync(path.join(dir, 'x/y/z'), 'utf8')).toBe('deep');
    expect(statSync(path.join(dir, 'x/y/z')).mode & 0o777).toBe(0o600);
    for (const d of ['x', 'x/y']) expect(statSync(path.join(dir, d)).mode & 0o777).toBe(0o755);
    expect(Object.keys(r.stamps).sort()).toEqual(['a', 'x/w', 'x/y/z']);
    expect(await writer.stampOf(target, 'x/y/z')).toBe(r.stamps['x/y/z']);
  });

  it('verifies nested files like top-level ones: unchanged bytes are left alone', async () => {
    const { target } = setup();
    await writer.sync(target, [file('x/y')], [], { createTarget: true });
    const again = await writer.sync(target, [file('x/y')], []);
    expect(again).toMatchObject({ written: [], unchanged: ['x/y'] });
  });

  it('refuses a symlink planted where a directory belongs, writing nothing through it', async () => {
    const { target, dir, outside } = setup();
    mkdirSync(dir);
    symlinkSync(outside, path.join(dir, 'x'));
    const err = await writer.sync(target, [file('x/evil'), file('ok')], []).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ProjectionError);
    expect((err as ProjectionError).reason).toBe('UnsafePath');
    expect(readdirSync(outside)).toEqual([]);
    expect(readFileSync(path.join(dir, 'ok'), 'utf8')).toBe('ok'); // the other file is still written
  });

  it('refuses a regular file where a directory belongs', async () => {
    const { target, dir } = setup();
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'x'), 'planted');
    const err = await writer.sync(target, [file('x/y')], []).then(() => undefined, (e: unknown) => e);
    expect((err as ProjectionError).reason).toBe('UnsafePath');
    expect(readFileSync(path.join(dir, 'x'), 'utf8')).toBe('planted');
  });

  it.each(['../x', 'a/../../x', '/etc/passwd', 'a//b', './a', 'a/.', '.ownerrefs-tmp.a', 'd/.ownerrefs-tmp.b', ''])('refuses the path %j before touching the disk', async (p) => {
    const { target, dir } = setup();
    const err = await writer.sync(target, [file(p)], [], { createTarget: true }).then(() => undefined, (e: unknown) => e);
    expect((err as ProjectionError).reason).toBe('UnsafePath');
    expect(existsSync(dir)).toBe(false);
  });

  it('closes a nested directory whose mode it could not set (EROFS), failing only its files, sync after sync', async () => {
    const { target, dir } = setup();
    mkdirSync(path.join(dir, 'x'), { recursive: true, mode: 0o700 }); // not 0755: step 1b changes its mode
    const open = new Map<number, string>();
    const failing = (base: FsOps): FsOps => ({ ...base, async open(p, flags, mode) {
      const f = await base.open(p, flags, mode);
      open.set(f.fd, p);
      return { ...f, fd: f.fd, stat: () => f.stat(), read: (b) => f.read(b), writeAll: (b) => f.writeAll(b),
        chmod: (m) => (p.endsWith('/x') ? Promise.reject(Object.assign(new Error('EROFS: read-only file system'), { code: 'EROFS' })) : f.chmod(m)),
        close: () => { open.delete(f.fd); return f.close(); } };
    } });
    const w = new FsVolumeWriter({ ops: { memory: failing(inlineOps), disk: failing(threadPoolOps) } });
    for (let i = 0; i < 3; i++) {
      await expect(w.sync(target, [file('a'), file('x/y')], [], { createTarget: true })).rejects.toThrow(/EROFS/);
    }
    expect(readFileSync(path.join(dir, 'a'), 'utf8')).toBe('a');
    expect([...open.values()]).toEqual([]);
  });

  it('clear removes the files, then the directories it made, deepest first, then the target', async () => {
    const { target, dir } = setup();
    await writer.sync(target, [file('a'), file('x/y/z'), file('x/w')], [], { createTarget: true });
    expect((await writer.clear(target, ['a', 'x/y/z', 'x/w'])).removed.sort()).toEqual(['a', 'x/w', 'x/y/z']);
    expect(existsSync(dir)).toBe(false);
  });

  it('clear leaves a directory holding something it did not write, and says so', async () => {
    const { target, dir } = setup();
    await writer.sync(target, [file('x/y')], [], { createTarget: true });
    writeFileSync(path.join(dir, 'x', 'other'), 'not ours');
    const err = await writer.clear(target, ['x/y']).then(() => undefined, (e: unknown) => e);
    expect((err as ProjectionError).reason).toBe('NameTaken');
    expect(readFileSync(path.join(dir, 'x', 'other'), 'utf8')).toBe('not ours');
    expect(lstatSync(path.join(dir, 'x')).isDirectory()).toBe(true);
  });
});
