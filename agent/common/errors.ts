// Typed errors. Each carries a stable reason (used as the Event reason suffix and
// the metrics label), the pod/volume it concerns, and the underlying cause.
// They are logged once, where they are handled (the reconciler), never where raised.

import { describe } from '../../projections/describe.ts';

/**
 * Every failure reason, with what it means; the first group is the pod author's to fix.
 * docs/reference/events.md is generated from this table.
 */
export const FAILURE_REASONS = {
  InvalidAnnotation: 'the ownerrefs.dev/volume annotation is not a comma-separated list of valid volume names (DNS-1123 labels), or names too many',
  VolumeNotDeclared: 'the annotation names a volume the pod does not have',
  UnsupportedVolumeType: 'the annotation names a volume that is not an emptyDir',
  InvalidMirrorUID: 'kubernetes.io/config.mirror is not a valid uid, or names another pod',
  InvalidUID: 'metadata.uid is not a valid pod uid (only a hand-written manifest has one: render)',
  InvalidDownwardAPI: "a CSI volume's downwardAPI items cannot be served",
  TooLarge: 'the rendered files add up to more than the size limit (--max-bytes)',
  UnsafePath: 'a symlink or non-directory on the way to the volume',
  NameTaken: 'something that is not our file sits at one of our names',
  // The node's, not the pod author's:
  WriteFailed: 'the filesystem refused (read-only, full, I/O error); retried with backoff',
  VolumeNotFound: 'the kubelet has not created (or has removed) the directory; for an emptyDir no Event: the agent writes when the directory appears',
} as const;

export type FailureReason = keyof typeof FAILURE_REASONS;

/** The node's failures, not the pod author's: their alert is OwnerRefsWriteFailures, not OwnerRefsPodsMisconfigured. */
export const NODE_SIDE_REASONS: readonly FailureReason[] = ['WriteFailed', 'VolumeNotFound'];

export interface ErrorContext {
  pod?: string | undefined; // namespace/name
  volume?: string | undefined;
  file?: string | undefined;
}

export class ProjectionError extends Error {
  readonly reason: FailureReason;
  readonly context: ErrorContext;

  constructor(reason: FailureReason, message: string, context: ErrorContext = {}, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ProjectionError';
    this.reason = reason;
    this.context = context;
  }

  /** The same error with more context (the writer knows the file, the reconciler the pod). */
  withContext(extra: ErrorContext): ProjectionError {
    return new ProjectionError(this.reason, this.message, { ...this.context, ...extra }, this.cause);
  }
}

/**
 * The text of the Warning Event a failure gets: `Reason: volume "name": message`. The volume
 * is named here, once, so messages made with a volume in their context do not name it.
 * `render` prints the same text for the same pod.
 */
export function eventText(e: ProjectionError): string {
  const where = e.context.volume ? `volume ${describe(e.context.volume)}: ` : '';
  return `${e.reason}: ${where}${e.message}`;
}

/** A flag, an environment variable or a kubeconfig is wrong: the operator's to fix; the CLI exits 2. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Errno of a Node system error, if any. */
export function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}
