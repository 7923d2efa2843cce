// The writer's descriptor-relative steps (agent/files/volume/writer.ts numbers them), and how
// a system error becomes a ProjectionError. Every path here is either the trusted root or
// /proc/self/fd/N/<one safe component>: nothing is ever resolved through the volume by name.

import { constants as C, type Stats } from 'node:fs';
import path from 'node:path';
import { errnoOf, ProjectionError, type FailureReason } from '../../common/errors.ts';
import type { FileOps, FsOps } from './fsops.ts';

const DIR_FLAGS = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW;
/** A CSI target directory: readable by any uid in the pod, writable by the agent only. */
export const TARGET_DIR_MODE = 0o755;

/** A single path component we are willing to resolve: no separators, no dot names. */
export function isSafeComponent(c: string): boolean {
  return c.length > 0 && c.length <= 255 && c !== '.' && c !== '..' && !c.includes('/') && !c.includes('\0');
}

/** A doubled slash, or a '.' or '..' component: what path.normalize would change in an absolute path. */
const NOT_NORMAL = /\/\/|\/\.\.?(?:\/|$)/;

/**
 * path.join(root, ...names), without re-normalising the whole path when every name is a
 * single safe component (only the short root is, and only when it needs it): this runs on
 * every directory event and pod update; normalising 130-character paths was about 5 % of
 * the agent's CPU in a burst, and the root alone still 2 % in V8's interpreter.
 */
export function joinUnder(root: string, names: readonly string[]): string {
  if (names.length === 0 || !root.startsWith('/') || !names.every(isSafeComponent)) return path.join(root, ...names);
  const r = NOT_NORMAL.test(root) ? path.normalize(root) : root; // the root is normally normal already
  return (r.endsWith('/') ? r : r + '/') + names.join('/');
}

/** Steps 1 and 1a (`createLast`), 1b (`createAll`: every component, for item subdirectories); step 10 too. */
export async function openDirectory(ops: FsOps, target: { root: string; components: readonly string[] }, createLast = false, createAll = false): Promise<FileOps> {
  let dir: FileOps;
  try {
    dir = await ops.open(target.root, C.O_RDONLY | C.O_DIRECTORY); // the root is trusted configuration
  } catch (err) {
    throw dirError(err, target.root);
  }
  for (const [i, c] of target.components.entries()) {
    if (!isSafeComponent(c)) {
      await dir.close();
      throw new ProjectionError('UnsafePath', `refusing path component ${JSON.stringify(c)}`);
    }
    try {
      const at = `/proc/self/fd/${dir.fd}/${c}`;
      // EEXIST: whatever is there is opened below like any component (a symlink fails ELOOP).
      if (createAll || (createLast && i === target.components.length - 1)) await ops.mkdir(at, TARGET_DIR_MODE).catch(unlessExists);
      const next = await ops.open(at, DIR_FLAGS);
      await dir.close();
      dir = next;
    } catch (err) {
      await dir.close();
      throw dirError(err, c);
    }
  }
  return dir;
}

function unlessExists(err: unknown): void {
  if (errnoOf(err) !== 'EEXIST') throw err;
}

/** Steps 10 and 12: a directory already gone is nothing to remove. */
export function absentAsNull(err: unknown): null {
  if (err instanceof ProjectionError && err.reason === 'VolumeNotFound') return null;
  throw err;
}

export function dirError(err: unknown, component: string): ProjectionError {
  const code = errnoOf(err);
  if (code === 'ENOENT') return new ProjectionError('VolumeNotFound', `volume directory not present (${component} missing)`, {}, err);
  if (code === 'ELOOP' || code === 'ENOTDIR') {
    return new ProjectionError('UnsafePath', `${component} is a symlink or not a directory; refusing to follow it`, {}, err);
  }
  return new ProjectionError('WriteFailed', `cannot open ${component}: ${code ?? String(err)}`, {}, err);
}

export async function lstatOrNull(ops: FsOps, path: string, name: string): Promise<Stats | null> {
  try {
    return await ops.lstat(path);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(err, name, 'inspecting');
  }
}

export async function unlinkIfPresent(ops: FsOps, path: string, name: string): Promise<void> {
  try {
    await ops.unlink(path);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return;
    if (code === 'EISDIR' || code === 'EPERM') {
      throw new ProjectionError('NameTaken', `${name}: a directory occupies a name the agent uses`, { file: name }, err);
    }
    throw ioError(err, name, 'removing');
  }
}

export function ioError(err: unknown, file: string, doing: string): ProjectionError {
  const code = errnoOf(err);
  // The directory vanished under us (kubelet tore the volume down): not a write failure.
  const reason: FailureReason = code === 'ENOENT' ? 'VolumeNotFound' : 'WriteFailed';
  return new ProjectionError(reason, `${doing} ${file} failed: ${code ?? String(err)}`, { file }, err);
}

/**
 * A file's path below the target: plain names joined by '/' (downwardAPI items may nest),
 * none of them starting with the writer's temporary prefix.
 */
export function checkRelative(p: string, reservedPrefix: string): void {
  const parts = p.split('/');
  if (!parts.every(isSafeComponent) || parts.some((c) => c.startsWith(reservedPrefix))) {
    throw new ProjectionError('UnsafePath', `refusing file name ${JSON.stringify(p)}`, { file: p });
  }
}

/** Files grouped by their directory below the target ('' for the target itself), in first-seen order. */
export function bySubdirectory<T extends { path: string }>(files: readonly T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const f of files) {
    const sub = f.path.includes('/') ? f.path.slice(0, f.path.lastIndexOf('/')) : '';
    out.set(sub, [...out.get(sub) ?? [], f]);
  }
  return out;
}

/** Every directory the names imply below the target, deepest first. */
export function subdirectoriesDeepestFirst(names: readonly string[]): string[] {
  const dirs = new Set<string>();
  for (const n of names) {
    const parts = n.split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
  }
  return [...dirs].sort((a, b) => b.split('/').length - a.split('/').length);
}
