// The whole mutation of one object: the pod spec's rewrite (podspec.ts), at the place its
// kind keeps it (projections/workloadkinds.ts), lifted to the object's JSON Patch, the annotations
// a Pod's spec reads, or a denial.

import { annotationsReadBy, annotationValue, CHAIN_KEYS } from '../../../projections/annotations.ts';
import type { ControllerChain } from '../../../projections/chain.ts';
import { isRecord, type OwnerReference } from '../../../projections/types.ts';
import { clip, displayName, oneLine } from '../../common/validation.ts';
import { otelWarnings, pointer, rewriteSpec, scanSpec, usesKepSyntax, type PatchOp, type RewriteContext, type ScannedSpec } from './podspec.ts';
import { ANNOTATION_KEYS, ANNOTATIONS, type AnnotationKey } from '../../../projections/names.ts';
import { workloadKindNamed } from '../../../projections/workloadkinds.ts';

export type Mutation =
  /** `changed` names each field rewritten, for the log; `annotations` are those set on a Pod being created. */
  | { allowed: true; patch: PatchOp[]; changed: string[]; annotations: AnnotationKey[]; warnings: string[] }
  | { allowed: false; reason: DenialReason; message: string };

/** Why an object is refused (the webhook's metric ownerrefs_webhook_denials_total counts them by it). */
export type DenialReason = 'InvalidOwnerReferences' | 'AnnotationsTooLarge';
/** Every DenialReason, for the metric's series. */
export const DENIAL_REASONS: readonly DenialReason[] = ['InvalidOwnerReferences', 'AnnotationsTooLarge'];

/** The answer for an object the webhook leaves as it is. */
export function unchanged(warnings: string[] = []): Mutation {
  return { allowed: true, patch: [], changed: [], annotations: [], warnings };
}

function dig(obj: unknown, path: readonly string[]): unknown {
  let at = obj;
  for (const k of path) at = isRecord(at) ? at[k] : undefined;
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

/** The API server's bound on all of an object's annotations together (keys and values). */
export const MAX_ANNOTATION_BYTES = 256 * 1024;

/** What admission knows of the pod's controller chain (see chainAtAdmission). */
export type ChainSource = (namespace: string, owners: readonly OwnerReference[]) => ControllerChain;

/**
 * Until the chain is read at admission, it says what it knows: the pod's own controller,
 * and that the agent on the pod's node reads the rest (Pending).
 */
export const chainAtAdmission: ChainSource = (_namespace, owners) => {
  const controller = owners.find((o) => o.controller === true);
  return controller
    ? { items: [controller], end: { reason: 'Pending', message: `the agent on the pod's node reads ${controller.kind} ${controller.name} (node label ownerrefs.dev/follow-owners)` } }
    : { items: [], end: { reason: 'NoController', message: 'the pod has no controlling owner' } };
};

export interface MutateOptions extends Pick<RewriteContext, 'ephemeralOnly'> {
  chain?: ChainSource;
  /** An UPDATE: the spec is rewritten as at CREATE, but a Pod's annotations are the agent's by then, never overwritten. */
  update?: boolean;
  /** The request's namespace (the API server's, trusted); the object's own metadata.namespace only offline (`inject`). */
  namespace?: string;
  /** The pod spec already scanned, and the annotations a Pod being created reads (review.ts's plan): not walked again. */
  scanned?: Scanned;
}

/**
 * What the webhook makes of one object of `kind` (the kind of the request, not of the JSON):
 * the KEP syntax pointed at our annotations in its pod spec, and, for a Pod being created,
 * each of our annotations its spec reads set to its value (overwriting what the author wrote),
 * and every other of our annotations the author wrote removed: whatever a pod's spec reads,
 * an ownerrefs.dev/ annotation on it was written by the webhook or the agent.
 */
export function mutate(kind: string, obj: unknown, opts: MutateOptions = {}): Mutation {
  const path = workloadKindNamed(kind)?.podSpec;
  if (!path) return unchanged();
  const pod = kind === 'Pod';
  const { scan, reads, creating } = opts.scanned ?? scanned(kind, obj, opts)!;
  const meta = dig(obj, ['metadata']) as { name?: unknown; generateName?: unknown; namespace?: unknown; ownerReferences?: unknown; annotations?: unknown } | undefined;
  const existing = isRecord(meta?.annotations) ? meta.annotations : undefined;
  const authored = creating && existing ? ANNOTATION_KEYS.filter((k) => Object.hasOwn(existing, k)) : [];
  const otel = otelWarnings(scan);
  if (!usesKepSyntax(scan) && reads.length === 0 && authored.length === 0) return unchanged(otel);
  const name = objectName(meta);
  const { owners, refusals } = pod ? ownersOf(meta?.ownerReferences) : { owners: [], refusals: [] };
  if (refusals.length > 0) return { allowed: false, reason: 'InvalidOwnerReferences', message: denial(kind, name, refusals) };
  const r = rewriteSpec(scan, opts.ephemeralOnly ? { ephemeralOnly: opts.ephemeralOnly } : {});
  const prefix = '/' + path.join('/');
  const patch = r.ops.map((op) => ({ ...op, path: prefix + op.path }));
  const warnings = [...r.warnings, ...otel];
  if (owners.filter((o) => o.controller === true).length > 1) warnings.push('the pod lists more than one owner with controller: true; the API server refuses that for any pod');
  // The author's own values of our keys go first: those the spec reads are set below, the
  // others (and the Node's, which admission cannot know) stay unset until the agent writes them.
  const removed = authored.filter((k) => !reads.includes(k) || k === ANNOTATIONS.node);
  patch.push(...removed.map((k): PatchOp => ({ op: 'remove', path: pointer('metadata', 'annotations', k) })));
  if (reads.length > 0) {
    const namespace = opts.namespace ?? (typeof meta?.namespace === 'string' ? meta.namespace : '');
    const values = admissionValues(reads, owners, namespace, opts.chain ?? chainAtAdmission);
    const kept = Object.fromEntries(Object.entries(existing ?? {}).filter(([k]) => !(removed as string[]).includes(k)));
    const bytes = annotationBytes({ ...kept, ...Object.fromEntries(values) });
    if (bytes > MAX_ANNOTATION_BYTES) {
      return { allowed: false, reason: 'AnnotationsTooLarge', message: denial(kind, name, [`the annotations would come to ${bytes} bytes with ${[...values.keys()].join(', ')}, over the ${MAX_ANNOTATION_BYTES} bytes the API server allows: the pod has too many owners, or other annotations too large, for its spec to read them this way`]) };
    }
    patch.push(...annotationOps(meta, existing, values));
  }
  return { allowed: true, patch, changed: [...r.changed, ...removed.map((k) => `annotation ${k} removed`), ...reads.map((k) => `annotation ${k}`)], annotations: reads, warnings };
}

/**
 * The object's pod spec scanned once, and the annotations it reads that admission sets (only
 * a Pod being created gets them); undefined for a kind without a pod spec.
 */
export function scanned(kind: string, obj: unknown, opts: Pick<MutateOptions, 'update' | 'ephemeralOnly'> = {}): Scanned | undefined {
  const path = workloadKindNamed(kind)?.podSpec;
  if (!path) return undefined;
  const scan = scanSpec(dig(obj, path));
  const creating = kind === 'Pod' && !opts.update && !opts.ephemeralOnly;
  return { scan, creating, reads: creating ? annotationsReadBy(scan.refs) : [] };
}

/** A pod spec scanned, and whether the object is a Pod being created (the one time its annotations are the webhook's). */
export interface Scanned {
  scan: ScannedSpec;
  creating: boolean;
  reads: AnnotationKey[];
}

/** The values admission sets: those it can know (the Node's cannot be, before the pod is bound). */
function admissionValues(reads: AnnotationKey[], owners: readonly OwnerReference[], namespace: string, chain: ChainSource): Map<AnnotationKey, string> {
  let walked: ControllerChain | undefined;
  const out = new Map<AnnotationKey, string>();
  for (const key of reads) {
    if (CHAIN_KEYS.has(key)) walked ??= chain(namespace, owners);
    const v = annotationValue(key, owners, { chain: walked });
    if (v) out.set(key, v.value);
  }
  return out;
}

function annotationOps(meta: object | undefined, existing: Record<string, unknown> | undefined, values: Map<AnnotationKey, string>): PatchOp[] {
  if (values.size === 0) return [];
  const all = Object.fromEntries(values);
  if (meta === undefined) return [{ op: 'add', path: '/metadata', value: { annotations: all } }];
  if (existing === undefined) return [{ op: 'add', path: '/metadata/annotations', value: all }];
  // "add" of an object member replaces it when present: an author's own value is overwritten.
  return [...values].map(([k, v]) => ({ op: 'add', path: pointer('metadata', 'annotations', k), value: v }));
}

/** How the API server counts annotations toward their bound: every key and value, in bytes. */
function annotationBytes(a: Record<string, unknown>): number {
  let n = 0;
  for (const [k, v] of Object.entries(a)) n += Buffer.byteLength(k) + (typeof v === 'string' ? Buffer.byteLength(v) : 0);
  return n;
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
 * A Pod's owners for its annotation. From the API server they are always well typed; an
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
