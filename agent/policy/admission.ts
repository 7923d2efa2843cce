// What the agent makes of one pod before it touches any disk: whether the pod opted in,
// which volume directories its annotation resolves to, the files, and every refusal with
// the reason and message the pod's Warning Event carries. The reconciler runs this on each
// pod event; `ownerrefs-agent render` runs the same function, so the dry run is the
// agent's own verdict, not a copy of it.

import { ProjectionError } from '../common/errors.ts';
import { describe } from '../common/validation.ts';
import type { NodeSettings } from '../kube/nodeconfig.ts';
import { ownersOf, project, type OwnerReference, type ProjectedFile } from '../../projections/index.ts';
import { ANNOTATION_MIRROR, optedIn, resolveVolumes, usesCsiDriver, type ResolvedVolume } from '../volume/resolve.ts';
import type { PodView } from './podtable.ts';

export interface AdmissionOptions {
  kubeletRoot: string;
  settings: NodeSettings;
  maxBytes: number;
  /** CSI mode: a pod with an inline volume of this driver opts in without the annotation. */
  csiDriver?: string | undefined;
  /** The pod's mirror annotation names a directory it may not use (see DiskClaims), and why. */
  mirrorRefused?: { claimed: string; why: string } | undefined;
}

export interface Admission {
  /** The annotation, or (CSI mode) an inline volume of the driver. */
  optedIn: boolean;
  /** The annotation's emptyDir volumes that are served. */
  volumes: ResolvedVolume[];
  files: ProjectedFile[];
  owners: readonly OwnerReference[];
  /** Everything the pod author should fix, in the order the Events report them. */
  errors: ProjectionError[];
  /** Set when the files are refused as a whole: nothing is written anywhere. */
  tooLarge: ProjectionError | undefined;
}

export function admit(pod: PodView, o: AdmissionOptions): Admission {
  const { volumes, errors } = o.mirrorRefused
    ? { volumes: [], errors: [new ProjectionError('InvalidMirrorUID',
      `${ANNOTATION_MIRROR} ${describe(o.mirrorRefused.claimed)} ${o.mirrorRefused.why}; only the kubelet sets it, on mirror pods of static pods: remove it`)] }
    : resolveVolumes(pod, o.kubeletRoot);
  const files = project(pod, o.settings);
  const size = files.reduce((n, f) => n + f.bytes.length, 0);
  const tooLarge = size > o.maxBytes ? new ProjectionError('TooLarge',
    `the pod's ownerReferences render to ${size} bytes, over the agent's limit of ${o.maxBytes}; files are left as they were`) : undefined;
  return {
    optedIn: optedIn(pod) || usesCsiDriver(pod, o.csiDriver),
    volumes, files, owners: ownersOf(pod),
    errors: tooLarge ? [...errors, tooLarge] : errors,
    tooLarge,
  };
}
