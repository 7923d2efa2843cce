// The narrow view of a Pod that projections read. Structural, so both the
// agent's own watch objects and @kubernetes/client-node's V1Pod satisfy it.

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  /** Absent and false are different on the wire: Go's *bool with omitempty. */
  controller?: boolean | null | undefined;
  blockOwnerDeletion?: boolean | null | undefined;
}

export interface PodMeta {
  metadata?: {
    name?: string | undefined;
    namespace?: string | undefined;
    uid?: string | undefined;
    annotations?: Record<string, string> | null | undefined;
    ownerReferences?: readonly OwnerReference[] | null | undefined;
  } | undefined;
}

/** One file a projection wants in the volume. Paths are fixed names, never pod-controlled. */
export interface ProjectedFile {
  path: string;
  bytes: Buffer;
  mode: number;
}

/** Which optional files to render; node labels turn these on and off. */
export interface ProjectionOptions {
  envFile: boolean;
  dependentsFile: boolean;
  /** nodeOwnerReferences: the pod's Node as an owner (free: the agent watches its Node). */
  nodeFile: boolean;
  /** controllerChain and workloadOwnerReferences (costs RBAC and API reads: opt-in). */
  followOwners: boolean;
}
