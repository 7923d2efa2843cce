// After a restart: which targets had this driver published? The agent keeps no state
// of its own for that. The kubelet writes <volume>/vol_data.json (driver name, volume
// handle) before every NodePublishVolume and removes it after NodeUnpublishVolume, so
// its pods directory already is the record, and it cannot disagree with the kubelet.
// (Our own state file would need a writable host directory of its own, and could go
// stale if the kubelet cleaned up while the agent was down.)
//
// Everything read here is kubelet-owned: <pod>/volumes/kubernetes.io~csi/<volume>/
// is made by the kubelet (root, 0750) and no pod can write in it. The file is still
// opened O_NOFOLLOW|O_NONBLOCK after an lstat, and bounded in size.

import { constants as C } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { errnoOf } from '../../common/errors.ts';
import { F } from '../../monitoring/logfields.ts';
import { isValidPodUID } from '../../common/validation.ts';
import { CSI_PLUGIN_DIR, MOUNT_DIR, parseTargetPath, VOL_DATA_FILE, type CsiTarget } from './paths.ts';

export interface PublishedTarget extends CsiTarget {
  targetPath: string;
  volumeId: string;
}

const MAX_VOL_DATA_BYTES = 64 * 1024;

/** Targets of `driver` whose mount directory exists, from the kubelet's vol_data.json files. */
export async function findPublished(root: string, driver: string, log: Logger): Promise<PublishedTarget[]> {
  const out: PublishedTarget[] = [];
  for (const uid of await listDir(path.join(root, 'pods'))) {
    if (!isValidPodUID(uid)) continue;
    const csiDir = path.join(root, 'pods', uid, 'volumes', CSI_PLUGIN_DIR);
    for (const volume of await listDir(csiDir)) {
      try {
        const data = await readVolData(path.join(csiDir, volume, VOL_DATA_FILE));
        if (data?.driverName !== driver) continue;
        const targetPath = path.join(csiDir, volume, MOUNT_DIR);
        const t = parseTargetPath(root, targetPath);
        // No mount directory: the kubelet had not called (or finished) NodePublishVolume; it will.
        if (typeof t === 'string' || !(await fs.lstat(targetPath).then((st) => st.isDirectory(), () => false))) continue;
        out.push({ ...t, targetPath, volumeId: typeof data.volumeHandle === 'string' ? data.volumeHandle : '' });
      } catch (err) {
        log.warn({ [F.podUID]: uid, [F.volume]: volume, [F.err]: err }, 'cannot read the kubelet\'s volume data; skipping');
      }
    }
  }
  return out;
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return [];
    throw err;
  }
}

async function readVolData(file: string): Promise<Record<string, unknown> | undefined> {
  const st = await fs.lstat(file).catch((err: unknown) => {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  });
  if (!st?.isFile() || st.size > MAX_VOL_DATA_BYTES) return undefined;
  const fh = await fs.open(file, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  try {
    const buf = Buffer.alloc(MAX_VOL_DATA_BYTES + 1);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    if (bytesRead > MAX_VOL_DATA_BYTES) return undefined;
    const data: unknown = JSON.parse(buf.subarray(0, bytesRead).toString('utf8'));
    return typeof data === 'object' && data !== null ? data as Record<string, unknown> : undefined;
  } finally {
    await fh.close();
  }
}
