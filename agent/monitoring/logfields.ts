// Structured log field names, in one place so dashboards and queries stay stable.
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
