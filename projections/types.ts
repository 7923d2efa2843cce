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
  /** Set when these bytes say the answer is not known yet (see KeepRule). */
  keep?: KeepRule | undefined;
}

/**
 * For a file whose answer is not settled (an owner still being read, or failing to be):
 * an agent-owned file already in place that starts with one of `prefixes` (it says the
 * same as far as the new bytes know) is left as it is instead of being overwritten with
 * "not known". The files of one `group` are left together or not at all, so they never
 * disagree with each other.
 */
export interface KeepRule {
  group: string;
  prefixes: readonly Buffer[];
  /** Also: the file holds exactly what `derive` makes of the bytes in place at `of` (a file of the same group). */
  matches?: { of: string; derive: (bytes: Buffer) => Buffer | undefined } | undefined;
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

/** A JSON object (not null, not a list): what every reader of untrusted input checks first. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
