// Every name the product puts into a cluster or reads from one: annotations, labels, field
// paths, the CSI driver. One table each, so that the webhook, the agent, the manifests and
// the docs generated from them can never disagree on a spelling.

/** The prefix of every annotation and label of ours. */
export const PREFIX = 'ownerrefs.dev/';

/**
 * The pod annotations the KEP's syntax is pointed at (annotations.ts gives each its value).
 * Only the webhook and the agent write them.
 */
export const ANNOTATIONS = {
  ownerReferences: 'ownerrefs.dev/owner-references',
  chain: 'ownerrefs.dev/controller-chain',
  workload: 'ownerrefs.dev/workload-owner-references',
  node: 'ownerrefs.dev/node-owner-references',
  workloadKind: 'ownerrefs.dev/workload-kind',
  workloadName: 'ownerrefs.dev/workload-name',
  workloadUid: 'ownerrefs.dev/workload-uid',
  controllerKind: 'ownerrefs.dev/controller-kind',
  controllerName: 'ownerrefs.dev/controller-name',
  controllerUid: 'ownerrefs.dev/controller-uid',
  otel: 'ownerrefs.dev/otel-resource-attributes',
} as const;
export type AnnotationName = keyof typeof ANNOTATIONS;
export type AnnotationKey = (typeof ANNOTATIONS)[AnnotationName];
export const ANNOTATION_KEYS: readonly AnnotationKey[] = Object.values(ANNOTATIONS);

/** The field path that reads annotation `key` (what the API server accepts, in env and in volumes). */
export function annotationField(key: string): string {
  return `metadata.annotations['${key}']`;
}

/** KEP-4753's field path. */
export const OWNER_REFERENCES_FIELD = 'metadata.ownerReferences';
/** Beyond the KEP: the controller chain's files under field paths of our own. */
export const EXTENSION_FIELDS = {
  chain: 'ownerrefs.dev/controllerChain',
  workload: 'ownerrefs.dev/workloadOwnerReferences',
  node: 'ownerrefs.dev/nodeOwnerReferences',
} as const;

/**
 * The pod annotation that opts an emptyDir volume into the agent's files (the retired file
 * form, still served): a comma-separated list of volume names.
 */
export const ANNOTATION_VOLUME = 'ownerrefs.dev/volume';
/** The kubelet's annotation on a static pod's mirror. */
export const ANNOTATION_MIRROR = 'kubernetes.io/config.mirror';
/** The CSI driver, and the CSI volume attribute that carries a downwardAPI source (by hand, or from an earlier webhook's rewrite). */
export const DRIVER_NAME = 'ownerrefs.dev';
export const DOWNWARD_API_ATTRIBUTE = 'downwardAPI';

/** Node labels that configure the agent on that node (node/nodeconfig.ts says what each does). */
export const NODE_LABEL = {
  paused: 'ownerrefs.dev/paused',
  envFile: 'ownerrefs.dev/env-file',
  dependentsFile: 'ownerrefs.dev/dependents-file',
  nodeFile: 'ownerrefs.dev/node-file',
  followOwners: 'ownerrefs.dev/follow-owners',
} as const;
/** The namespace label that turns on KEP-4753's mitigation (manifests/forbidpolicy.ts). */
export const FORBID_LABEL = 'ownerrefs.dev/forbid-reading-owners';
/** The webhook's record, on its own Secret, of CAs still trusted while they retire. */
export const RETIRING_ANNOTATION = 'ownerrefs.dev/retiring-cas';
/** The component that reports the agent's Events. */
export const EVENT_COMPONENT = 'ownerrefs.dev/agent';

/**
 * admission.mode=policy: the scheduling gate the policy puts on a Pod created reading a value
 * of its controller chain, and the label that lets the gate's lifter watch those pods alone
 * (admission/gate/). Both go when the values are written.
 */
export const SCHEDULING_GATE = 'ownerrefs.dev/workload-values';
export const GATED_LABEL = 'ownerrefs.dev/gated';
/** The MutatingWebhookConfiguration, the namespace the webhook runs in, and the path it serves. */
export const WEBHOOK_CONFIG_NAME = 'ownerrefs.dev';
export const WEBHOOK_NAMESPACE = 'ownerrefs-system';
export const MUTATE_PATH = '/mutate';
