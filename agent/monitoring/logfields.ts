// Structured log field names, in one place so dashboards and queries stay stable.
import { pino } from 'pino';

export const F = {
  pod: 'pod', // namespace/name
  podUID: 'podUID',
  volume: 'volume',
  file: 'file',
  node: 'node', // every agent line: the logger's base (main.ts)
  reason: 'reason',
  err: 'err',
  written: 'written',
  removed: 'removed',
  resource: 'resource',
  resourceVersion: 'resourceVersion',
  backoffMs: 'backoffMs',
  suppressed: 'suppressed',
  label: 'label',
  value: 'value',
  kind: 'kind', // of an object the webhook reviewed
  object: 'object', // namespace/name of it
  operation: 'operation',
  changed: 'changed',
} as const;

/**
 * The loggers' serializer of the `err` field. An expected failure of the network or of the
 * API server (an errno code, an HTTP status) is its type, message and code: its stack is
 * Node's socket internals, the same on every retry of a daemon that retries forever.
 * Anything else gets pino's standard form, stack included: that is a bug to find.
 */
export function serializeErr(err: unknown): unknown {
  if (!(err instanceof Error)) return pino.stdSerializers.err(err as Error);
  const { code, status } = err as { code?: unknown; status?: unknown };
  if (typeof code !== 'string' && typeof status !== 'number') return pino.stdSerializers.err(err);
  return {
    type: err.name,
    message: err.message,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof status === 'number' ? { status } : {}),
  };
}
