/**
 * VolumeWriter: the only code in the agent that touches a volume directory.
 *
 * The directory is writable by the pod, so every name in it may have been planted
 * by a hostile author. The writer therefore never resolves a path through the
 * volume by name: it holds a descriptor to the directory and works relative to it
 * (through /proc/self/fd/N/<name>, Node's stand-in for the *at() syscalls).
 *
 * On-disk layout (emptyDir mode; <root> is the trusted kubelet root):
 *
 *   <root>/pods/<podUID>/volumes/kubernetes.io~empty-dir/<volume>/   (0777, pod-writable)
 *   ├── ownerReferences              regular file, 0644, agent-owned
 *   ├── ownerReferences.env          (optional, node label)
 *   ├── dependentOwnerReferences     (optional, node label)
 *   └── .ownerrefs-tmp.<file>        transient: exists only between steps 4 and 7
 *
 * CSI mode (agent/files/csi/): the same files, in a directory the agent creates itself
 * (step 1a) because the kubelet only makes its parent, and removes on unpublish
 * (steps 10-12). The pod mounts it read-only, so nothing in it is pod-planted, but
 * the same rules apply:
 *
 *   <root>/pods/<podUID>/volumes/kubernetes.io~csi/<volume>/   (kubelet-owned, 0750)
 *   ├── vol_data.json                the kubelet's; never touched
 *   └── mount/                       0755, agent-created: the files as above, or a
 *       ├── labels                   volume's downwardAPI items (its downwardAPI
 *       └── meta/                    attribute): names the pod chose, checked, and nested
 *           └── name                 directories 0755, agent-created (step 1b)
 *
 * Each file is replaced on its own by write-to-temporary + rename, so a reader sees
 * the old bytes or the new bytes, never a partial, empty or missing file. (The
 * kubelet's `..data` symlink swap gives cross-file snapshots, but needs recursive
 * clean-up of old generations in a pod-writable directory, which is the shape of
 * CVE-2017-1002102; our files are independent, so per-file atomicity is enough.)
 * Temporary names are fixed per file, so a crash leaves at most one per file and
 * the next sync removes it without listing a directory the pod can fill.
 *
 * The walk of step 1 (and 1a, 10, 12) and the errno-to-ProjectionError mapping live in
 * dirfd.ts; reading back one file (steps 3, 3a) and replacing it (steps 4-7a) in atomicfile.ts;
 * clearing a CSI target (steps 10-12) in clear.ts; every call goes through fsops.ts: on a memory-backed volume (tmpfs) the synchronous
 * calls, which cannot block on a device and cost a fifth of the CPU; on a disk-backed one
 * fs/promises, so a hung disk stalls a pool thread, never the agent.
 *
 * Algorithm of sync(target, files, remove):
 *   1. Open <root>, then each component below it, one at a time, with
 *      O_DIRECTORY|O_NOFOLLOW relative to the previous descriptor. ENOENT means the
 *      kubelet has not made the volume (never create it); ELOOP/ENOTDIR mean a
 *      symlink or non-directory on the way: refuse.
 *   2. Remove temporaries left by an earlier crash (unlink never follows links).
 *   3. For each file, lstat its name; if it is a regular agent-owned file with the
 *      wanted mode and size, open it O_NOFOLLOW|O_NONBLOCK, check it is still the
 *      same inode, and compare bytes. Equal: leave it alone.
 *  3a. Files with a KeepRule (their answer is not known yet), per group: read each name
 *      as in step 3 (agent-owned, the wanted mode, at most KEEP_MAX_BYTES); if every file
 *      of the group is there, starts with one of its prefixes, and (`matches`) is exactly
 *      what its rule derives from another file of the group, leave them all (they come
 *      back in `kept` with the bytes in place). Otherwise write them as any other. The
 *      decision is keeprules.ts's.
 *   4. Create the temporary with O_CREAT|O_EXCL|O_NOFOLLOW (a planted name fails EEXIST),
 *      with the file's mode when the process umask leaves it intact, else 0600.
 *   5. Write all bytes; fchmod the descriptor when step 4 could not give the mode (umask-
 *      proof, never chmod by path).
 *   6. Close the temporary.
 *   7. rename(temporary, name): atomic replace; a symlink at the name is replaced,
 *      not followed; a directory there fails and is reported as NameTaken.
 *  7a. lstat(name): it must be the inode written in step 5. If the pod swapped the
 *      temporary for something else between steps 6 and 7, the rename moved the pod's
 *      entry onto the name: NameTaken, and the retry writes the file again. (Node has no
 *      O_TMPFILE+linkat or RENAME_NOREPLACE; this is how the window is closed.)
 *   8. Unlink names in `remove` that are agent-owned regular files (a file turned off).
 *   9. Close the directory descriptor: nothing is held in a pod's volume between syncs.
 *  On failure after step 4 the temporary is unlinked, and the old file is untouched.
 *  A failure on one file does not stop the others; the first failure is thrown at the end.
 *  Without { verify } (the bytes are known to have changed since the last sync), steps 2
 *  and 3 are skipped; step 4 then meets a leftover temporary as EEXIST, unlinks it and
 *  tries once more. Each written or verified file's stamp (inode, size, mtime, ctime: for a
 *  written file, from step 7a's lstat, since the rename sets the ctime) is returned, so the
 *  caller can tell its own writes from the pod's in directory events.
 *
 *  A file whose path has directories (a downwardAPI item "meta/name") is written by steps
 *  2-7 in its own directory:
 *   1b. From the target's descriptor, open each directory of the path one component at a
 *      time, O_DIRECTORY|O_NOFOLLOW, making a missing one (mkdir 0755 relative to its
 *      parent's descriptor, then fchmod if ours). A symlink or file there is refused
 *      (UnsafePath) for that file only. No component is '.', '..' or a temporary's name.
 *
 *  With { createTarget } (CSI publish), step 1 becomes:
 *   1a. Walk to the parent as in step 1, then mkdir the last component relative to the
 *      parent descriptor (EEXIST is fine: whatever is there is then opened like every
 *      other component, so a symlink planted there is still refused), and fchmod the
 *      opened directory to 0755 if we own it (mkdir is subject to the umask).
 *
 * Algorithm of clear(target, names, { sweep }) (CSI unpublish: remove only what the agent wrote):
 *  10. Walk to the target as in step 1 (the target too is opened O_NOFOLLOW). ENOENT
 *      anywhere: already gone, nothing to do (unpublish is idempotent).
 * 10a. With { sweep } (CSI unpublish: the pod may be gone, or its items refused since, so
 *      `names` may not be all the agent wrote):
 *      list the target and, one component at a time, each directory in it (opened
 *      O_DIRECTORY|O_NOFOLLOW from its parent's descriptor, at most MAX_DEPTH deep, at most
 *      SWEEP_MAX_ENTRIES entries), and add to `names` every regular file the agent owns
 *      (a temporary as the name it stands for). Only for CSI targets: the agent made the
 *      directory and the pod mounts it read-only, so nothing listed there is the pod's.
 *  11. Unlink each temporary, and each of `names` that is a regular agent-owned file,
 *      as in step 8. Anything else is left where it is. Close the target.
 * 11a. For names with directories, rmdir each directory they imply, deepest first,
 *      relative to its parent's descriptor; one that is not empty stays (step 12 reports it).
 *  12. Walk to the parent, and rmdir the target relative to its descriptor. rmdir never
 *      follows a symlink and never removes a non-empty directory: ENOTEMPTY means
 *      entries the agent did not write, reported as NameTaken and left in place.
 */

import type { Stats } from 'node:fs';
import type { ProjectedFile } from '../../../projections/index.ts';
import { RESERVED_NAME_PREFIX } from '../../../projections/downwardapi.ts';
import { ProjectionError } from '../../common/errors.ts';
import { bySubdirectory, checkRelative, isSafeComponent, joinUnder, lstatOrNull, openDirectory, TARGET_DIR_MODE, unlinkIfPresent } from './dirfd.ts';
import { readOwn, readUmask, replaceFile, stamp } from './atomicfile.ts';
import { clearTarget } from './clear.ts';
import { inlineOps, threadPoolOps, type FileOps, type FsOps } from './fsops.ts';
import { keptGroups } from './keeprules.ts';

/** Where to write: a trusted absolute root plus components that must each be a real directory. */
export interface VolumeTarget {
  root: string;
  components: readonly string[];
  /** A tmpfs (emptyDir medium: Memory): calls cannot block on a device, so they run inline. */
  memory?: boolean;
}

/** The call sets the writer uses (fsops.ts): inline for memory-backed targets, the thread pool for the rest. */
export interface WriterOps {
  memory: FsOps;
  disk: FsOps;
}

export interface SyncResult {
  written: string[];
  unchanged: string[];
  removed: string[];
  /** Files left in place by their KeepRule (step 3a): name -> the bytes there. */
  kept: Record<string, Buffer>;
  /** File name -> stamp of the file now in place (see stampOf). */
  stamps: Record<string, string>;
}

export interface SyncOptions {
  /** Create the last component of the target if missing (step 1a; CSI publish only). */
  createTarget?: boolean;
  /** Check what is on disk first (steps 2-3). Default true; false when the bytes are known to differ. */
  verify?: boolean;
}

/** The seam the agent uses; tests may pass a fake. */
export interface VolumeWriter {
  sync(target: VolumeTarget, files: readonly ProjectedFile[], remove?: readonly string[], opts?: SyncOptions): Promise<SyncResult>;
  /** Steps 10-12: remove the agent's files among `names` (or, with sweep, all of them: 10a), then the target directory itself. */
  clear(target: VolumeTarget, names: readonly string[], opts?: { sweep?: boolean }): Promise<{ removed: string[] }>;
  /** The stamp of `name` in the target (lstat, read-only), or undefined if absent. */
  stampOf(target: VolumeTarget, name: string): Promise<string | undefined>;
}

/** Fixed per file; reserved, so no downwardAPI item can be named like one (projections/downwardapi.ts). */
export const TEMP_PREFIX = RESERVED_NAME_PREFIX;
/** Step 3a reads no more than this: far above any chain the agent writes (at most 8 owners). */
const KEEP_MAX_BYTES = 64 * 1024;


export class FsVolumeWriter implements VolumeWriter {
  readonly #uid: number;
  readonly #ops: WriterOps;
  /** The process umask, or null if unknown (then every file is fchmod-ed). */
  readonly #umask: number | null;

  /**
   * `uid`: the owner of files this agent writes (default: our own uid). `ops`: the call
   * sets (default fsops.ts's; bench/syscalls.ts counts and times calls through this seam).
   */
  constructor(opts: { uid?: number; ops?: WriterOps; umask?: number | null } = {}) {
    this.#uid = opts.uid ?? process.getuid?.() ?? 0;
    this.#ops = opts.ops ?? { memory: inlineOps, disk: threadPoolOps };
    this.#umask = opts.umask === undefined ? readUmask() : opts.umask;
  }

  /** Which calls to use for a target. */
  #opsFor(target: VolumeTarget): FsOps {
    return target.memory ? this.#ops.memory : this.#ops.disk;
  }

  async sync(target: VolumeTarget, files: readonly ProjectedFile[], remove: readonly string[] = [], opts: SyncOptions = {}): Promise<SyncResult> {
    for (const f of files) checkRelative(f.path, TEMP_PREFIX);
    for (const name of remove) {
      if (!isSafeComponent(name)) throw new ProjectionError('UnsafePath', `refusing file name ${JSON.stringify(name)}`, { file: name });
    }
    const ops = this.#opsFor(target);
    const dir = await openDirectory(ops, target, opts.createTarget); // step 1 (1a)
    const result: SyncResult = { written: [], unchanged: [], removed: [], kept: {}, stamps: {} };
    const verify = opts.verify ?? true;
    let firstError: unknown;
    // One bad name (say, a directory planted at it) must not stop the other files.
    const each = async (name: string, op: () => Promise<void>) => {
      try {
        await op();
      } catch (err) {
        firstError ??= err instanceof ProjectionError ? err.withContext({ file: name }) : err;
      }
    };
    try {
      if (opts.createTarget) await this.#targetMode(dir); // step 1a
      for (const [sub, group] of bySubdirectory(files)) {
        if (sub === '') {
          await this.#syncIn(ops, dir, group, verify, result, each);
          continue;
        }
        // Step 1b: a nested item path: each directory below the target opened (made, 0755, when
        // missing) one component at a time, O_NOFOLLOW, relative to the target's descriptor.
        let subdir: FileOps | undefined;
        try {
          subdir = await openDirectory(ops, { root: `/proc/self/fd/${dir.fd}`, components: sub.split('/') }, false, true);
          await this.#targetMode(subdir);
        } catch (err) {
          await subdir?.close().catch(() => {}); // opened, but its mode could not be set
          for (const f of group) await each(f.path, () => Promise.reject(err));
          continue;
        }
        try {
          await this.#syncIn(ops, subdir, group, verify, result, each);
        } finally {
          await subdir.close();
        }
      }
      const at = (name: string) => `/proc/self/fd/${dir.fd}/${name}`;
      for (const name of remove) { // step 8
        await each(name, async () => {
          const st = await lstatOrNull(ops, at(name), name);
          if (st?.isFile() && st.uid === this.#uid) {
            await unlinkIfPresent(ops, at(name), name);
            result.removed.push(name);
          }
        });
      }
    } finally {
      await dir.close(); // step 9
    }
    if (firstError !== undefined) throw firstError;
    return result;
  }

  /** Steps 2-7 for files whose parent directory is open as `dir` (their last component is the name there). */
  async #syncIn(ops: FsOps, dir: FileOps, files: readonly ProjectedFile[], verify: boolean, result: SyncResult,
    each: (name: string, op: () => Promise<void>) => Promise<void>): Promise<void> {
    const at = (name: string) => `/proc/self/fd/${dir.fd}/${name}`;
    const base = (f: ProjectedFile) => f.path.slice(f.path.lastIndexOf('/') + 1);
    if (verify) for (const f of files) await each(f.path, () => unlinkIfPresent(ops, at(TEMP_PREFIX + base(f)), f.path)); // step 2
    // Step 3a. A file that cannot be read is written as usual (and its error reported there).
    const fits = (f: ProjectedFile) => (st: Stats) => st.isFile() && st.uid === this.#uid && (st.mode & 0o7777) === f.mode && st.size <= KEEP_MAX_BYTES;
    const kept = await keptGroups(files, (f) => readOwn(ops, at(base(f)), f.path, fits(f)).catch(() => undefined));
    for (const f of files) {
      await each(f.path, async () => {
        const old = kept.get(f.path);
        if (old) {
          result.kept[f.path] = old.bytes;
          result.stamps[f.path] = old.stamp;
          return;
        }
        const current = verify ? await this.#isCurrent(ops, at(base(f)), f) : undefined; // step 3
        if (current) {
          result.unchanged.push(f.path);
          result.stamps[f.path] = current;
          return;
        }
        const exact = this.#umask !== null && (f.mode & ~0o777) === 0 && (f.mode & this.#umask) === 0;
        result.stamps[f.path] = await replaceFile(ops, at(TEMP_PREFIX + base(f)), at(base(f)), f, !verify, exact); // steps 4-7
        result.written.push(f.path);
      });
    }
  }

  clear(target: VolumeTarget, names: readonly string[], opts: { sweep?: boolean } = {}): Promise<{ removed: string[] }> {
    return clearTarget(this.#opsFor(target), target, names, this.#uid, opts.sweep ?? false); // steps 10-12 (clear.ts)
  }

  async stampOf(target: VolumeTarget, name: string): Promise<string | undefined> {
    if (!name.split('/').every(isSafeComponent) || !target.components.every(isSafeComponent)) return undefined;
    const st = await lstatOrNull(this.#opsFor(target), joinUnder(target.root, [...target.components, ...name.split('/')]), name).catch(() => null);
    return st ? stamp(st) : undefined;
  }

  /** Step 3: the file's stamp if it is ours and holds exactly these bytes, else undefined. */
  async #isCurrent(ops: FsOps, path: string, f: ProjectedFile): Promise<string | undefined> {
    const old = await readOwn(ops, path, f.path, (st) => this.#ours(st, f));
    return old?.bytes.equals(f.bytes) ? old.stamp : undefined;
  }

  /** mkdir is subject to the umask: make a target we own readable by every uid in the pod. */
  async #targetMode(dir: FileOps): Promise<void> {
    const st = await dir.stat();
    if (st.uid === this.#uid && (st.mode & 0o7777) !== TARGET_DIR_MODE) await dir.chmod(TARGET_DIR_MODE);
  }

  #ours(st: Stats, f: ProjectedFile): boolean {
    return st.isFile() && st.uid === this.#uid && (st.mode & 0o7777) === f.mode && st.size === f.bytes.length;
  }
}
