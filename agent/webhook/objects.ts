// Where each kind keeps its pod spec, and the whole mutation of one object: the pod
// spec's rewrite (podspec.ts) lifted to the object's JSON Patch, or a denial.
//
//   Pod                                    spec                      literal env
//   Deployment ReplicaSet StatefulSet
//   DaemonSet Job ReplicationController    spec.template.spec        annotation-backed env
//   CronJob                                spec.jobTemplate.spec.template.spec
//   PodTemplate                            template.spec

import type { OwnerReference } from '../../projections/types.ts';
import { clip, displayName, oneLine } from '../common/validation.ts';
import { mentionsOwnerReferences, rewriteSpec, type PatchOp, type RewriteContext } from './podspec.ts';

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

/** The refusals, joined into one admission message that names each field (bounded: it is logged and shown). */
function denial(kind: string, name: string, refusals: string[]): string {
  const shown = refusals.slice(0, 5);
  const more = refusals.length > shown.length ? ` (and ${refusals.length - shown.length} more)` : '';
  // Refusals quote the manifest's own keys; kubectl prints the message as it is.
  const text = oneLine(`ownerrefs.dev cannot serve metadata.ownerReferences for ${kind} ${name}: ${shown.join('; ')}${more}`);
  return clip(text, MAX_MESSAGE);
}

/** Longest denial message: five refusals with their quoted (80-character) names fit. */
const MAX_MESSAGE = 4096;

/**
 * Most bytes a rewrite may add. Each KEP env entry of a Pod gets the whole owners list as a
 * literal, so owners × entries could make a patch far larger than any object Kubernetes
 * stores (1.5 MiB in etcd): refused instead of built.
 */
export const MAX_PATCH_BYTES = 512 * 1024;

/** The patch's size, counted op by op, stopping as soon as it passes the limit. */
function overLimit(ops: readonly { value?: unknown }[]): number | undefined {
  let bytes = 0;
  for (const op of ops) {
    bytes += Buffer.byteLength(JSON.stringify(op.value ?? null));
    if (bytes > MAX_PATCH_BYTES) return bytes;
  }
  return undefined;
}

/** What the webhook makes of one object of `kind` (the kind of the request, not of the JSON). */
export function mutate(kind: string, obj: unknown, opts: Pick<RewriteContext, 'ephemeralOnly'> = {}): Mutation {
  const path = Object.hasOwn(POD_SPEC_PATHS, kind) ? POD_SPEC_PATHS[kind] : undefined; // never Object.prototype's keys
  if (!path) return { allowed: true, patch: [], changed: [], warnings: [] };
  const spec = dig(obj, path);
  const template = kind !== 'Pod';
  if (!mentionsOwnerReferences(spec, !template)) return { allowed: true, patch: [], changed: [], warnings: [] };
  const meta = dig(obj, ['metadata']) as { name?: unknown; generateName?: unknown; ownerReferences?: unknown } | undefined;
  const name = objectName(meta);
  const { owners, refusals } = template ? { owners: [], refusals: [] } : ownersOf(meta?.ownerReferences);
  if (refusals.length > 0) return { allowed: false, message: denial(kind, name, refusals) };
  const r = rewriteSpec(spec, { template, owners, at: path.join('.'), ...(opts.ephemeralOnly ? { ephemeralOnly: opts.ephemeralOnly } : {}) });
  if (r.refusals.length > 0) return { allowed: false, message: denial(kind, name, r.refusals) };
  const bytes = overLimit(r.ops);
  if (bytes !== undefined) {
    const env = r.ops.filter((op) => op.path.includes('/env/')).length;
    const why = env > 0
      ? `each of its ${env} env entries with fieldRef metadata.ownerReferences gets all ${owners.length} owners as its value: use fewer such entries, or a volume`
      : 'its volumes\' items are that large: use fewer or shorter items';
    return { allowed: false, message: denial(kind, name, [`the rewrite would add more than ${bytes} bytes to the object, over the webhook's limit of ${MAX_PATCH_BYTES} (${why})`]) };
  }
  const prefix = '/' + path.join('/');
  const warnings = owners.filter((o) => o.controller === true).length > 1
    ? ['the pod lists more than one owner with controller: true; the API server refuses that for any pod']
    : [];
  return { allowed: true, patch: r.ops.map((op) => ({ ...op, path: prefix + op.path })), changed: r.changed, warnings };
}

/**
 * Mutation runs before validation, so the name may be anything the author sent: shown as
 * is when it could be a Kubernetes name, else quoted with controls escaped.
 */
function objectName(meta: { name?: unknown; generateName?: unknown } | undefined): string {
  if (meta?.name !== undefined && meta.name !== '') return displayName(meta.name);
  return meta?.generateName !== undefined && meta.generateName !== '' ? `${displayName(meta.generateName)}*` : '(unnamed)';
}

/**
 * A Pod's owners for its env literal. From the API server they are always well typed; an
 * offline manifest (`inject`) may hold anything, and each entry that Kubernetes would not
 * decode is refused by its field, never rendered as an owner of empty strings.
 */
function ownersOf(refs: unknown): { owners: OwnerReference[]; refusals: string[] } {
  if (refs === undefined || refs === null) return { owners: [], refusals: [] };
  if (!Array.isArray(refs)) return { owners: [], refusals: ['metadata.ownerReferences: not a list'] };
  const refusals: string[] = [];
  refs.forEach((o: unknown, i) => {
    const at = `metadata.ownerReferences[${i}]`;
    if (typeof o !== 'object' || o === null || Array.isArray(o)) return void refusals.push(`${at}: not an object`);
    const r = o as Record<string, unknown>;
    // Each required, as the API server's validation requires them (never an owner of empty strings).
    for (const k of ['apiVersion', 'kind', 'name', 'uid']) {
      if (r[k] === undefined || r[k] === null || r[k] === '') refusals.push(`${at}.${k}: missing (Kubernetes requires apiVersion, kind, name and uid)`);
      else if (typeof r[k] !== 'string') refusals.push(`${at}.${k}: not a string`);
    }
    for (const k of ['controller', 'blockOwnerDeletion']) if (r[k] !== undefined && typeof r[k] !== 'boolean') refusals.push(`${at}.${k}: not a boolean (true or false, not quoted)`);
  });
  return { owners: refusals.length > 0 ? [] : refs as OwnerReference[], refusals };
}
