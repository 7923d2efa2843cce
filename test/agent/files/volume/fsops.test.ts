// The writer's two call sets must be interchangeable: same results, same errno codes.
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { constants as C } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inlineOps, threadPoolOps, type FsOps } from '../../../../agent/files/volume/fsops.ts';
import { tmpDir } from '../../../support/tmpdir.ts';

const SETS: [string, FsOps][] = [['inline', inlineOps], ['thread pool', threadPoolOps]];
const code = (p: Promise<unknown>) => p.then(() => 'ok', (err: NodeJS.ErrnoException) => err.code);

describe.each(SETS)('fsops: %s', (_name, ops) => {
  it('creates, writes all bytes, sets the mode, stats and reads back through a descriptor', async () => {
    const dir = tmpDir('fsops-');
    const p = path.join(dir, 'f');
    const bytes = Buffer.from('x'.repeat(70_000)); // more than one write call may take
    const fh = await ops.open(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 0o600);
    await fh.writeAll(bytes);
    await fh.chmod(0o644);
    expect((await fh.stat()).size).toBe(bytes.length);
    await fh.close();
    expect(readFileSync(p)).toEqual(bytes);
    expect(statSync(p).mode & 0o777).toBe(0o644);
    const rh = await ops.open(p, C.O_RDONLY);
    const buf = Buffer.alloc(bytes.length + 1);
    expect(await rh.read(buf)).toBe(bytes.length);
    await rh.close();
  });

  it('renames, lstats, unlinks, makes and removes directories', async () => {
    const dir = tmpDir('fsops-');
    writeFileSync(path.join(dir, 'a'), 'a');
    await ops.rename(path.join(dir, 'a'), path.join(dir, 'b'));
    expect((await ops.lstat(path.join(dir, 'b'))).isFile()).toBe(true);
    await ops.unlink(path.join(dir, 'b'));
    await ops.mkdir(path.join(dir, 'd'), 0o755);
    expect((await ops.lstat(path.join(dir, 'd'))).isDirectory()).toBe(true);
    await ops.rmdir(path.join(dir, 'd'));
  });

  it.each([
    { what: 'O_EXCL on an existing name', want: 'EEXIST', run: (ops: FsOps, d: string) => ops.open(path.join(d, 'there'), C.O_WRONLY | C.O_CREAT | C.O_EXCL) },
    { what: 'a missing file', want: 'ENOENT', run: (ops: FsOps, d: string) => ops.lstat(path.join(d, 'missing')) },
    { what: 'rmdir of a non-empty directory', want: 'ENOTEMPTY', run: (ops: FsOps, d: string) => ops.rmdir(d) },
    { what: 'mkdir over an existing name', want: 'EEXIST', run: (ops: FsOps, d: string) => ops.mkdir(path.join(d, 'there'), 0o755) },
    { what: 'unlink of a directory', want: 'EISDIR', run: (ops: FsOps, d: string) => ops.unlink(path.join(d, 'sub')) },
  ])('rejects $what with $want', async ({ run, want }) => {
    const dir = tmpDir('fsops-');
    writeFileSync(path.join(dir, 'there'), '');
    mkdirSync(path.join(dir, 'sub'));
    expect(await code(run(ops, dir))).toBe(want);
  });
});
