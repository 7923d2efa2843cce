// What the agent makes of one pod before it touches any disk: whether the pod opted in,
// which volume directories its annotation resolves to, the files, and every refusal with
// the reason and message the pod's Warning Event carries. The reconciler runs this on each
// pod event; `ownerrefs-agent render` runs the same function, so the dry run is the
// agent's own verdict, not a copy of it.

import { ProjectionError } from '../common/errors.ts';
import { describe } from '../common/validation.ts';
import type { NodeSettings } from '../node/nodeconfig.ts';
import { checkSource, DownwardAPIError, renderDownwardAPI, type DownwardAPISource, type ResourceList } from '../../projections/downwardapi.ts';
import { FILES, ownersOf, project, type OwnerReference, type ProjectedFile, type ProjectionContext } from '../../projections/index.ts';
import { optedIn, resolveVolumes, usesCsiDriver, type ResolvedVolume } from './volume/resolve.ts';

import { ANNOTATION_MIRROR, DOWNWARD_API_ATTRIBUTE } from '../../projections/names.ts';
import { type PodView } from '../node/podview.ts';

export interface AdmissionOptions {
  kubeletRoot: string;
  settings: NodeSettings;
  maxBytes: number;
  /** CSI mode: a pod with an inline volume of this driver opts in without the annotation. */
  csiDriver?: string | undefined;
  /** The pod's mirror annotation names a directory it may not use (see DiskClaims), and why. */
  mirrorRefused?: { claimed: string; why: string } | undefined;
  /** The node's allocatable: limits a container does not set read as this (downwardAPI items). */
  allocatable?: ResourceList | undefined;
  /** The Node and the controller chain, for the files beyond the KEP. */
  context?: ProjectionContext | undefined;
}

export interface Admission {
  /** The annotation, or (CSI mode) an inline volume of the driver. */
  optedIn: boolean;
  /** The annotation's emptyDir volumes that are served. */
  volumes: ResolvedVolume[];
  files: ProjectedFile[];
  /** CSI volumes whose downwardAPI attribute gives them files of their own, or why not (also in `errors`). */
  volumeFiles: Map<string, ProjectedFile[] | ProjectionError>;
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
  const files = project(pod, o.settings, o.context);
  const size = files.reduce((n, f) => n + f.bytes.length, 0);
  const tooLarge = size > o.maxBytes ? new ProjectionError('TooLarge',
    `the pod's ownerReferences render to ${size} bytes, over the agent's limit of ${o.maxBytes}; files are left as they were`) : undefined;
  const volumeFiles = o.csiDriver === undefined ? new Map() : itemVolumes(pod, o.csiDriver, o.allocatable ?? {}, o.maxBytes, o.context ?? {});
  const refused = [...volumeFiles.values()].filter((v): v is ProjectionError => v instanceof ProjectionError);
  return {
    optedIn: optedIn(pod) || usesCsiDriver(pod, o.csiDriver),
    volumes, files, volumeFiles, owners: ownersOf(pod),
    errors: [...errors, ...refused, ...(tooLarge ? [tooLarge] : [])],
    tooLarge,
  };
}

/** The files the node's settings turn off: a sync unlinks them where the agent wrote them. */
export function filesTurnedOff(s: NodeSettings): string[] {
  return [
    ...(s.envFile ? [] : [FILES.env]),
    ...(s.dependentsFile ? [] : [FILES.dependents]),
    ...(s.nodeFile ? [] : [FILES.node]),
    ...(s.followOwners ? [] : [FILES.chain, FILES.workload]),
  ];
}

/**
 * The files of each of the driver's volumes that carries a downwardAPI source: the retired
 * form, still served (projections/downwardapi.ts says where such volumes come from). The
 * attribute is pod-author input that the API server never validates, so it is checked
 * here; a volume whose items cannot be served gets nothing.
 */
function itemVolumes(pod: PodView, driver: string, allocatable: ResourceList, maxBytes: number, ctx: ProjectionContext): Map<string, ProjectedFile[] | ProjectionError> {
  const out = new Map<string, ProjectedFile[] | ProjectionError>();
  const containers = new Set([...pod.spec?.containers ?? [], ...pod.spec?.initContainers ?? []].flatMap((c) => (c.name ? [c.name] : [])));
  for (const v of pod.spec?.volumes ?? []) {
    const attr = v.csi?.driver === driver ? v.csi.volumeAttributes?.[DOWNWARD_API_ATTRIBUTE] : undefined;
    if (attr === undefined) continue;
    const refuse = (message: string) => out.set(v.name, new ProjectionError('InvalidDownwardAPI', message, { volume: v.name }));
    let src: unknown;
    try {
      src = JSON.parse(attr);
    } catch (err) {
      refuse(`the ${DOWNWARD_API_ATTRIBUTE} attribute is not JSON (${(err as Error).message}); write it as a downwardAPI volume in KEP-4753's syntax instead, which the ownerrefs.dev webhook serves`);
      continue;
    }
    const problems = checkSource(src, DOWNWARD_API_ATTRIBUTE, containers);
    if (problems.length > 0) {
      refuse(problems.slice(0, 3).join('; ') + (problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''));
      continue;
    }
    try {
      const files = renderDownwardAPI(pod, src as DownwardAPISource, allocatable, ctx);
      const size = files.reduce((n, f) => n + f.bytes.length, 0);
      if (size > maxBytes) out.set(v.name, new ProjectionError('TooLarge', `the items render to ${size} bytes, over the agent's limit of ${maxBytes}`, { volume: v.name }));
      else out.set(v.name, files);
    } catch (err) {
      if (!(err instanceof DownwardAPIError)) throw err;
      refuse(err.message);
    }
  }
  return out;
}
