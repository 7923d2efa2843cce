// The one shape of target path the driver accepts. The kubelet is trusted, but the
// path is still checked before any of it is used: a request that does not name
// <kubelet-root>/pods/<pod-uid>/volumes/kubernetes.io~csi/<volume>/mount, with each
// component a plain name, is refused before the filesystem is touched. The writer
// then walks those components one by one with O_NOFOLLOW (agent/files/volume/writer.ts).

import path from 'node:path';
import { describe, isDns1123Subdomain, isValidPodUID } from '../../common/validation.ts';
import { isSafeComponent } from '../volume/dirfd.ts';
import type { VolumeTarget } from '../volume/writer.ts';

/** The kubelet's directory for CSI volumes inside a pod's volumes directory. */
export const CSI_PLUGIN_DIR = 'kubernetes.io~csi';
/** The kubelet publishes to <volume>/mount and keeps vol_data.json beside it. */
export const MOUNT_DIR = 'mount';
export const VOL_DATA_FILE = 'vol_data.json';


export interface CsiTarget {
  /** The pod's directory name under <kubelet-root>/pods. */
  diskUid: string;
  /** The volume's directory name (its name in the pod spec). */
  volume: string;
  /** For the writer: the trusted root and the components below it, ending in "mount". */
  target: VolumeTarget;
}

export function targetFor(kubeletRoot: string, diskUid: string, volume: string): CsiTarget {
  return {
    diskUid,
    volume,
    target: { root: kubeletRoot, components: ['pods', diskUid, 'volumes', CSI_PLUGIN_DIR, volume, MOUNT_DIR] },
  };
}

/** The target a path names, or a sentence saying why it is refused. `root`: the absolute, normalised kubelet root. */
export function parseTargetPath(root: string, targetPath: string): CsiTarget | string {
  const shape = `<kubelet-root>/pods/<pod-uid>/volumes/${CSI_PLUGIN_DIR}/<volume>/${MOUNT_DIR} with kubelet root ${root}`;
  const quoted = describe(targetPath, 200);
  if (targetPath.includes('\0') || !path.isAbsolute(targetPath) || path.normalize(targetPath) !== targetPath || targetPath.endsWith('/')) {
    return `target_path ${quoted} is not a clean absolute path`;
  }
  const prefix = root === '/' ? '/' : root + '/';
  if (!targetPath.startsWith(prefix)) return `target_path ${quoted} is not below the kubelet root; expected ${shape}`;
  const parts = targetPath.slice(prefix.length).split('/');
  const [pods, uid, volumes, plugin, volume, mount] = parts;
  if (parts.length !== 6 || pods !== 'pods' || volumes !== 'volumes' || plugin !== CSI_PLUGIN_DIR || mount !== MOUNT_DIR ||
    uid === undefined || volume === undefined) {
    return `target_path ${quoted} does not have the kubelet's layout; expected ${shape}`;
  }
  if (!isValidPodUID(uid) || !isSafeComponent(uid)) return `target_path ${quoted}: ${describe(uid)} is not a valid pod UID`;
  // An inline volume's directory is its name in spec.volumes (a DNS-1123 label); a
  // persistent volume's is the PV name (a DNS-1123 subdomain). Accept the wider one,
  // so a refusal for a PV says "ephemeral only" rather than "bad path".
  if (!isDns1123Subdomain(volume) || !isSafeComponent(volume)) return `target_path ${quoted}: ${describe(volume)} is not a valid volume name`;
  return targetFor(root, uid, volume);
}
