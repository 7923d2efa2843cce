// One file in a directory the writer holds open (writer.ts draws the layout and numbers the
// steps): read it back only if it is ours (steps 3, 3a), replace it atomically (steps 4-7a),
// and the stamp that tells one version of it from another. Every path here is
// /proc/self/fd/<dir>/<name>: relative to a descriptor, never resolved through the volume.

import { constants as C, readFileSync, type Stats } from 'node:fs';
import type { ProjectedFile } from '../../../projections/index.ts';
import { errnoOf, ProjectionError } from '../../common/errors.ts';
import { ioError, lstatOrNull, unlinkIfPresent } from './dirfd.ts';
import type { FileOps, FsOps } from './fsops.ts';

const READ_FLAGS = C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK;
const CREATE_FLAGS = C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW;

/**
 * Identifies one version of a file: a rename, an in-place write or a change of its metadata
 * changes it. The ctime is in it because no process can set it back (a pod can restore an
 * mtime exactly, with `touch -r`).
 */
export function stamp(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.mode}:${st.uid}:${st.ctimeMs}`;
}

/** Step 7a: the name holds the inode step 5 wrote, unchanged since (the rename itself sets the ctime). */
function sameWrite(now: Stats, wrote: Stats): boolean {
  return now.dev === wrote.dev && now.ino === wrote.ino && now.size === wrote.size && now.mtimeMs === wrote.mtimeMs &&
    now.mode === wrote.mode && now.uid === wrote.uid;
}

/**
 * Steps 3 and 3a: the bytes and stamp of the regular agent-owned file at `path` if its
 * lstat passes `fits` (checked again on the opened descriptor, which must be the same inode).
 */
export async function readOwn(ops: FsOps, path: string, name: string, fits: (st: Stats) => boolean): Promise<{ bytes: Buffer; stamp: string } | undefined> {
  const st = await lstatOrNull(ops, path, name);
  if (!st || !fits(st)) return undefined;
  let fh: FileOps;
  try {
    fh = await ops.open(path, READ_FLAGS);
  } catch (err) {
    // Swapped for a link or removed since lstat: just replace it.
    if (['ELOOP', 'ENOENT', 'ENXIO'].includes(errnoOf(err) ?? '')) return undefined;
    throw ioError(err, name, 'reading');
  }
  try {
    const now = await fh.stat();
    if (now.ino !== st.ino || now.dev !== st.dev || !fits(now)) return undefined;
    const buf = Buffer.alloc(now.size + 1);
    const bytesRead = await fh.read(buf);
    return bytesRead === now.size ? { bytes: buf.subarray(0, bytesRead), stamp: stamp(now) } : undefined;
  } finally {
    await fh.close();
  }
}

/**
 * Steps 4-7; returns the stamp of the file renamed into place. `exact`: the umask leaves
 * f.mode intact, so step 4 creates the file with it and step 5 needs no fchmod (one call
 * less per file, in the agent's interpreter-only V8).
 */
export async function replaceFile(ops: FsOps, tmp: string, final: string, f: ProjectedFile, clearLeftover: boolean, exact: boolean): Promise<string> {
  let fh: FileOps;
  try {
    fh = await ops.open(tmp, CREATE_FLAGS, exact ? f.mode : 0o600); // step 4
  } catch (err) {
    if (errnoOf(err) === 'EEXIST' && clearLeftover) {
      await unlinkIfPresent(ops, tmp, f.path); // step 2 was skipped: a crash's leftover, or planted
      return replaceFile(ops, tmp, final, f, false, exact);
    }
    if (errnoOf(err) === 'EEXIST') {
      // Step 2 removed it, so something raced us to the name: refuse rather than loop.
      throw new ProjectionError('NameTaken', `temporary name for ${f.path} was re-created concurrently`, { file: f.path }, err);
    }
    throw ioError(err, f.path, 'creating a temporary for');
  }
  let wrote: Stats;
  try {
    try {
      await fh.writeAll(f.bytes); // step 5
      if (!exact) await fh.chmod(f.mode);
      wrote = await fh.stat(); // rename keeps inode, size, mtime and mode
    } finally {
      await fh.close(); // step 6
    }
    await ops.rename(tmp, final); // step 7
  } catch (err) {
    await unlinkIfPresent(ops, tmp, f.path).catch(() => undefined);
    const code = errnoOf(err);
    if (code === 'EISDIR' || code === 'ENOTEMPTY' || code === 'EEXIST') {
      throw new ProjectionError('NameTaken', `${f.path} exists and is a directory; delete it so the agent can write the file`, { file: f.path }, err);
    }
    throw ioError(err, f.path, 'writing');
  }
  const now = await lstatOrNull(ops, final, f.path); // step 7a
  // Gone: the kubelet tore the volume down meanwhile, or a process in the pod removed it at
  // once. Not reported on the pod (teardown is nobody's fault); the directory watch or the
  // volume's return brings the agent back.
  if (!now) throw new ProjectionError('VolumeNotFound', `${f.path} was gone right after it was written (the volume torn down, or the file removed in the pod)`, { file: f.path });
  if (!sameWrite(now, wrote)) {
    throw new ProjectionError('NameTaken', `${f.path}: something else was at the name right after it was written ` +
      '(a process in the pod replaced the file or its temporary); the file will be written again', { file: f.path });
  }
  return stamp(now);
}

/**
 * The umask, from /proc/self/status (reading it with process.umask() means setting it, a
 * race with the thread pool's file creation). Null when it cannot be read.
 */
export function readUmask(): number | null {
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? parseInt(m[1]!, 8) : null;
  } catch {
    return null;
  }
}
