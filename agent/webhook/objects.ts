// Where each kind keeps its pod spec, and the whole mutation of one object: the pod
// spec's rewrite (podspec.ts) lifted to the object's JSON Patch, or a denial.
//
//   Pod                                    spec                      literal env
//   Deployment ReplicaSet StatefulSet
//   DaemonSet Job ReplicationController    spec.template.spec        annotation-backed env
//   CronJob                                spec.jobTemplate.spec.template.spec
//   PodTemplate                            template.spec

import type { OwnerReference } from '../../projections/types.ts';
import { mentionsOwnerReferences, rewriteSpec, type PatchOp } from './podspec.ts';

/** Kind -> path of its pod spec. */
export const POD_SPEC_PATHS: Readonly<Record<string, readonly string[]>> = {
  Pod: ['spec'],
  Deployment: ['spec', 'template', 'spec'],
  ReplicaSet: ['spec', 'template', 'spec'],
  StatefulSet: ['spec', 'template', 'spec'],
  DaemonSet: ['spec', 'template', 'spec'],
  Job: ['spec', 'template', 'spec'],
  ReplicationController: ['spec', 'template', 'spec'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template', 'spec'],
  PodTemplate: ['template', 'spec'],
};

export type Mutation =
  | { allowed: true; patch: PatchOp[]; changed: string[]; warnings: string[] }
  | { allowed: false; message: string };

function dig(obj: unknown, path: readonly string[]): unknown {
  let at = obj;
  for (const k of path) at = typeof at === 'object' && at !== null && !Array.isArray(at) ? (at as Record<string, unknown>)[k] : undefined;
  return at;
}

/** The refusals, joined into one admission message that names each field. */
function denial(kind: string, name: string, refusals: string[]): string {
  const shown = refusals.slice(0, 5);
  const more = refusals.length > shown.length ? ` (and ${refusals.length - shown.length} more)` : '';
  return `ownerrefs.dev cannot serve metadata.ownerReferences for ${kind} ${name}: ${shown.join('; ')}${more}`;
}

/** What the webhook makes of one object of `kind` (the kind of the request, not of the JSON). */
export function mutate(kind: string, obj: unknown): Mutation {
  const path = POD_SPEC_PATHS[kind];
  if (!path) return { allowed: true, patch: [], changed: [], warnings: [] };
  const spec = dig(obj, path);
  const template = kind !== 'Pod';
  if (!mentionsOwnerReferences(spec, !template)) return { allowed: true, patch: [], changed: [], warnings: [] };
  const meta = dig(obj, ['metadata']) as { name?: string; generateName?: string; ownerReferences?: OwnerReference[] } | undefined;
  const name = meta?.name || (meta?.generateName ? `${meta.generateName}*` : '(unnamed)');
  const owners = Array.isArray(meta?.ownerReferences) ? meta.ownerReferences : [];
  const r = rewriteSpec(spec, { template, owners, at: path.join('.') });
  if (r.refusals.length > 0) return { allowed: false, message: denial(kind, name, r.refusals) };
  const prefix = '/' + path.join('/');
  const warnings = owners.filter((o) => o.controller === true).length > 1
    ? ['the pod lists more than one owner with controller: true; the API server refuses that for any pod']
    : [];
  return { allowed: true, patch: r.ops.map((op) => ({ ...op, path: prefix + op.path })), changed: r.changed, warnings };
}
