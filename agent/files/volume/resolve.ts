// Policy: which directories a pod's annotation asks for, validated before any of
// it becomes a path. Everything here is pod-controlled input.

import { ProjectionError } from '../../common/errors.ts';
import { describe, isDns1123Label, isValidPodUID } from '../../common/validation.ts';
import type { VolumeTarget } from './writer.ts';
import type { PodVolumesView } from '../../node/podview.ts';
import { ANNOTATION_MIRROR, ANNOTATION_VOLUME } from '../../../projections/names.ts';

export const EMPTY_DIR_PLUGIN = 'kubernetes.io~empty-dir';

/** At most this many volumes per pod; more is refused as InvalidAnnotation. */
export const MAX_VOLUMES_PER_POD = 8;

export interface ResolvedVolume {
  name: string;
  target: VolumeTarget;
}

export interface VolumeResolution {
  volumes: ResolvedVolume[];
  /** Per-volume or whole-annotation problems; the valid volumes are still served. */
  errors: ProjectionError[];
}

/** True when the pod opted in; pods without the annotation cost nothing further. */
export function optedIn(pod: PodVolumesView): boolean {
  return pod.metadata?.annotations?.[ANNOTATION_VOLUME] !== undefined;
}

/** True when the pod declares an inline CSI volume of `driver` (CSI mode opts in that way). */
export function usesCsiDriver(pod: PodVolumesView, driver: string | undefined): boolean {
  return driver !== undefined && (pod.spec?.volumes ?? []).some((v) => v.csi?.driver === driver);
}

/** Parse the annotation value: a comma-separated list of volume names. */
export function parseVolumeList(value: string): { names: string[]; errors: ProjectionError[] } {
  const names: string[] = [];
  const errors: ProjectionError[] = [];
  const parts = value.split(',').map((p) => p.trim());
  if (parts.length > MAX_VOLUMES_PER_POD) {
    errors.push(new ProjectionError('InvalidAnnotation',
      `${ANNOTATION_VOLUME} lists ${parts.length} volumes; at most ${MAX_VOLUMES_PER_POD} are allowed`));
    return { names, errors };
  }
  const refused = new Set<string>(); // each bad name reported once (",,," is one mistake, not three)
  for (const p of parts) {
    if (!isDns1123Label(p)) { // Kubernetes requires volume names to be DNS-1123 labels
      if (refused.has(p)) continue;
      refused.add(p);
      errors.push(new ProjectionError('InvalidAnnotation',
        `${ANNOTATION_VOLUME}: ${describe(p)} is not a valid volume name (lower-case DNS-1123 label, at most 63 characters); ` +
        'set it to the name of an emptyDir volume, or a comma-separated list of them'));
    } else if (!names.includes(p)) {
      names.push(p);
    }
  }
  return { names, errors };
}

/** The on-disk pod directory name: the mirror annotation for static pods, else metadata.uid. */
export function diskUID(pod: PodVolumesView): { uid?: string; error?: ProjectionError } {
  const mirror = pod.metadata?.annotations?.[ANNOTATION_MIRROR];
  const uid = mirror ?? pod.metadata?.uid ?? '';
  if (!isValidPodUID(uid)) {
    return {
      error: new ProjectionError(mirror !== undefined ? 'InvalidMirrorUID' : 'InvalidUID',
        `${mirror !== undefined ? ANNOTATION_MIRROR : 'metadata.uid'} ${describe(uid)} is not a valid pod UID`),
    };
  }
  return { uid };
}

export function resolveVolumes(pod: PodVolumesView, kubeletRoot: string): VolumeResolution {
  const value = pod.metadata?.annotations?.[ANNOTATION_VOLUME];
  if (value === undefined) return { volumes: [], errors: [] };
  const { names, errors } = parseVolumeList(value);
  const { uid, error } = diskUID(pod);
  if (error || uid === undefined) return { volumes: [], errors: [...errors, ...(error ? [error] : [])] };
  const declared = pod.spec?.volumes ?? [];
  const volumes: ResolvedVolume[] = [];
  for (const name of names) {
    const v = declared.find((d) => d.name === name);
    if (!v) {
      errors.push(new ProjectionError('VolumeNotDeclared',
        `${ANNOTATION_VOLUME} names it, but the pod has no volume of that name; add an emptyDir volume of that name to spec.volumes`,
        { volume: name }));
    } else if (v.emptyDir === undefined || v.emptyDir === null) {
      errors.push(new ProjectionError('UnsupportedVolumeType',
        'not an emptyDir; the agent only writes into emptyDir volumes (use emptyDir: {medium: Memory})',
        { volume: name }));
    } else {
      // medium: Memory is a tmpfs the kubelet mounts: the writer may use inline calls there.
      const memory = (v.emptyDir as { medium?: string }).medium === 'Memory';
      volumes.push({ name, target: { root: kubeletRoot, components: ['pods', uid, 'volumes', EMPTY_DIR_PLUGIN, name], memory } });
    }
  }
  return { volumes, errors };
}
