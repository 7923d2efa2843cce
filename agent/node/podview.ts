// The parts of a pod object the agent reads, and the slim copy of them it keeps for every pod
// of its node: what the pod watch hands to both paths (the annotation keeper and the files),
// and what the CSI driver, the CLI and the benchmarks read a pod as.

import type { DownwardPod } from '../../projections/downwardapi.ts';
import type { PodMeta } from '../../projections/index.ts';
import { annotationRead } from '../../projections/annotations.ts';
import { ANNOTATION_KEYS, ANNOTATION_MIRROR, ANNOTATION_VOLUME, DOWNWARD_API_ATTRIBUTE } from '../../projections/names.ts';

/** What the files' volume resolution reads of a pod: its UID, its annotations, its volumes. */
export interface PodVolumesView {
  metadata?: {
    uid?: string | undefined;
    annotations?: Record<string, string> | null | undefined;
  } | undefined;
  spec?: {
    volumes?: readonly { name: string; emptyDir?: unknown; csi?: { driver?: string; volumeAttributes?: Record<string, string> | null } | null }[] | null | undefined;
  } | undefined;
}

/** What the annotation keeper reads of a container: its env entries' fieldRefs. */
interface EnvView { name?: string; resources?: unknown; env?: readonly { valueFrom?: { fieldRef?: { fieldPath?: string } | null } | null }[] | null }

/** The parts of a pod object the agent reads. */
export type PodView = PodMeta & PodVolumesView & DownwardPod & {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; deletionTimestamp?: string } | undefined;
  spec?: { nodeName?: string; containers?: readonly EnvView[] | null; initContainers?: readonly EnvView[] | null; ephemeralContainers?: readonly EnvView[] | null } | undefined;
  status?: { phase?: string } | undefined;
};

type ContainerResources = NonNullable<NonNullable<DownwardPod['spec']>['containers']>[number]['resources'];

/**
 * The parts of a pod the agent reads; the watch object itself (status and all) is not kept.
 * For the files: labels, annotations and container resources only when a volume's items may
 * read them. For the annotation keeper (annotations/keeper.ts): the annotations of ours (the
 * keys of projections/names.ts, read or not; no other ownerrefs.dev/ key of an author's), the env
 * entries that read one of them, the resourceVersion, the phase and whether it is being
 * deleted. Upserting the view is upserting the pod: a revisit upserts it again, and a
 * streamed first list holds only views until it is complete.
 */
export function slimView(pod: PodView): PodView {
  const a = pod.metadata?.annotations ?? {};
  const items = (pod.spec?.volumes ?? []).some((v) => v.csi?.volumeAttributes?.[DOWNWARD_API_ATTRIBUTE] !== undefined);
  // Only ours and the opt-ins: any author can park up to 256 KiB of other annotations on a pod,
  // and this view is held for every pod of the node. Ours the spec does not read are kept too:
  // the keeper removes them (a value no admission wrote), and they are gone once it has.
  const keep = [ANNOTATION_MIRROR, ANNOTATION_VOLUME, ...ANNOTATION_KEYS].filter((k) => a[k] !== undefined);
  const containers = (cs: readonly (EnvView & { name?: string; resources?: unknown })[] | null | undefined, resources: boolean) => cs?.map((c) => {
    const env = c.env?.filter((e) => annotationRead(e.valueFrom?.fieldRef?.fieldPath) !== undefined);
    return { name: c.name, ...(resources ? { resources: c.resources as ContainerResources } : {}), ...(env?.length ? { env } : {}) };
  });
  return {
    metadata: {
      name: pod.metadata?.name, namespace: pod.metadata?.namespace, uid: pod.metadata?.uid, resourceVersion: pod.metadata?.resourceVersion,
      ...(pod.metadata?.deletionTimestamp ? { deletionTimestamp: pod.metadata.deletionTimestamp } : {}),
      annotations: items ? pod.metadata?.annotations : Object.fromEntries(keep.map((k) => [k, a[k]!])),
      ...(items ? { labels: pod.metadata?.labels } : {}),
      ownerReferences: pod.metadata?.ownerReferences,
    },
    spec: {
      volumes: pod.spec?.volumes,
      containers: containers(pod.spec?.containers, items), initContainers: containers(pod.spec?.initContainers, items),
      ephemeralContainers: containers(pod.spec?.ephemeralContainers, false),
    },
    ...(pod.status?.phase ? { status: { phase: pod.status.phase } } : {}),
  };
}
