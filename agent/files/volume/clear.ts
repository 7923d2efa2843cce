// CSI unpublish's side of the writer: steps 10-12 of writer.ts, whose doc comment draws
// the layout and numbers the steps. The sweep by listing exists for CSI volumes stored in the
// retired form (a `downwardAPI` attribute: projections/downwardapi.ts), whose items name
// their own files; a volume without one holds only the agent's fixed file names. Everything is relative to descriptors opened
// O_NOFOLLOW, as in the writer; nothing here creates or writes a file.

import { MAX_DEPTH, RESERVED_NAME_PREFIX as TEMP_PREFIX } from '../../../projections/downwardapi.ts';
import { errnoOf, ProjectionError } from '../../common/errors.ts';
import { absentAsNull, bySubdirectory, checkRelative, dirError, ioError, isSafeComponent, lstatOrNull, openDirectory, subdirectoriesDeepestFirst, unlinkIfPresent } from './dirfd.ts';
import type { FileOps, FsOps } from './fsops.ts';

/** Step 10a lists at most this many entries (a volume's items are at most a few hundred). */
const SWEEP_MAX_ENTRIES = 10_000;

/**
 * Steps 10-12 of writer.ts (its doc numbers them): remove the agent's files among `given`
 * (with `sweep`, every file of the agent's in the target: step 10a), then the target.
 * `uid` owns the agent's files.
 */
export async function clearTarget(ops: FsOps, target: { root: string; components: readonly string[] }, given: readonly string[], uid: number, sweep: boolean): Promise<{ removed: string[] }> {
  const last = target.components.at(-1);
  if (!isSafeComponent(last ?? '')) throw new ProjectionError('UnsafePath', `refusing name ${JSON.stringify(last)}`);
  for (const name of given) checkRelative(name, TEMP_PREFIX);
  const removed: string[] = [];
  const dir = await openDirectory(ops, target).catch(absentAsNull); // step 10
  if (!dir) return { removed };
  let names = given;
  try {
    if (sweep) names = [...new Set([...given, ...await ownFiles(ops, dir, uid)])]; // step 10a
    for (const [sub, group] of bySubdirectory(names.map((path) => ({ path })))) {
      const parent: FileOps | null = sub === '' ? dir : await openDirectory(ops, { root: `/proc/self/fd/${dir.fd}`, components: sub.split('/') }).catch(absentAsNull);
      if (!parent) continue;
      try {
        for (const { path: name } of group) { // step 11
          const base = name.slice(name.lastIndexOf('/') + 1);
          const at = `/proc/self/fd/${parent.fd}/${base}`;
          await unlinkIfPresent(ops, `/proc/self/fd/${parent.fd}/${TEMP_PREFIX}${base}`, name);
          const st = await lstatOrNull(ops, at, name);
          if (st?.isFile() && st.uid === uid) {
            await unlinkIfPresent(ops, at, name);
            removed.push(name);
          }
        }
      } finally {
        if (parent !== dir) await parent.close();
      }
    }
    // Step 11a: the item subdirectories, deepest first; one that is not empty stays (step 12 says so).
    for (const sub of subdirectoriesDeepestFirst(names)) {
      const i = sub.lastIndexOf('/');
      const parent: FileOps | null = i < 0 ? dir : await openDirectory(ops, { root: `/proc/self/fd/${dir.fd}`, components: sub.slice(0, i).split('/') }).catch(absentAsNull);
      if (!parent) continue;
      try {
        await ops.rmdir(`/proc/self/fd/${parent.fd}/${sub.slice(i + 1)}`).catch((err: unknown) => {
          if (!['ENOENT', 'ENOTEMPTY', 'EEXIST', 'ENOTDIR'].includes(errnoOf(err) ?? '')) throw ioError(err, sub, 'removing');
        });
      } finally {
        if (parent !== dir) await parent.close();
      }
    }
  } finally {
    await dir.close();
  }
  const parent = await openDirectory(ops, { root: target.root, components: target.components.slice(0, -1) }).catch(absentAsNull);
  if (!parent) return { removed };
  try {
    await ops.rmdir(`/proc/self/fd/${parent.fd}/${last}`); // step 12
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOTEMPTY' || code === 'EEXIST') {
      throw new ProjectionError('NameTaken', `${last} holds entries the agent did not write; they are left in place`, {}, err);
    }
    if (code !== 'ENOENT') throw code === 'ENOTDIR' ? dirError(err, last!) : ioError(err, last!, 'removing');
  } finally {
    await parent.close();
  }
  return { removed };
}

/** Step 10a: the paths of the regular files `uid` owns in the tree below `top`. */
async function ownFiles(ops: FsOps, top: FileOps, uid: number): Promise<string[]> {
  const found: string[] = [];
  let entries = 0;
  const walk = async (dir: FileOps, prefix: string, depth: number): Promise<void> => {
    const listed = await ops.readdir(`/proc/self/fd/${dir.fd}`).catch((err: unknown) => { throw ioError(err, prefix || '.', 'listing'); });
    for (const e of listed) {
      if (++entries > SWEEP_MAX_ENTRIES) return;
      const name = e.name.startsWith(TEMP_PREFIX) ? e.name.slice(TEMP_PREFIX.length) : e.name;
      if (!isSafeComponent(name)) continue;
      if (e.isDirectory() && depth < MAX_DEPTH) {
        const sub = await openDirectory(ops, { root: `/proc/self/fd/${dir.fd}`, components: [e.name] }).catch(() => null);
        if (!sub) continue; // swapped for something else meanwhile: step 12 reports what stays
        try {
          await walk(sub, `${prefix}${e.name}/`, depth + 1);
        } finally {
          await sub.close();
        }
      } else if (e.isFile()) {
        const st = await lstatOrNull(ops, `/proc/self/fd/${dir.fd}/${e.name}`, e.name).catch(() => null);
        if (st?.isFile() && st.uid === uid) found.push(prefix + name);
      }
    }
  };
  await walk(top, '', 1);
  return found;
}
