// AdmissionReview (admission.k8s.io/v1) in and out. Every byte of a request is untrusted:
// the API server relays any pod author's object, and anything that can reach the port can
// send anything. A review that is not one gets a clear refusal, never a crash.

import { describe, displayName } from '../../common/validation.ts';
import { CHAIN_KEYS } from '../../../projections/annotations.ts';
import { isRecord, type OwnerReference } from '../../../projections/types.ts';
import type { Mutation, MutateOptions } from './objects.ts';
import { mutate, scanned, unchanged } from './objects.ts';
import { workloadKind, WORKLOAD_KINDS } from '../../../projections/workloadkinds.ts';

export const API_VERSION = 'admission.k8s.io/v1';

export interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  operation: string;
  namespace?: string;
  name?: string;
  subResource?: string;
  object: unknown;
  /** The object before an UPDATE. */
  oldObject?: unknown;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  patch?: string;
  status?: { code: number; message: string };
  warnings?: string[];
}

export class ReviewError extends Error {
  override readonly name = 'ReviewError';
  /** The request's uid when it could be read: the answer can still be a review. */
  readonly uid: string | undefined;
  constructor(message: string, uid?: string) {
    super(message);
    this.uid = uid;
  }
}

/** A value from the body, for a message: bounded, and never stringified whole (it may be nested thousands deep). */
function shown(v: unknown): string {
  return typeof v === 'string' ? describe(v) : v === undefined ? 'nothing' : displayName(v);
}

/** The request inside a review body, or a ReviewError saying what is wrong with it. */
export function parseReview(body: string): AdmissionRequest {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (err) {
    throw new ReviewError(`the body is not JSON: ${(err as Error).message}`);
  }
  if (!isRecord(doc)) throw new ReviewError('the body is not a JSON object');
  if (doc.apiVersion !== API_VERSION || doc.kind !== 'AdmissionReview') {
    throw new ReviewError(`expected apiVersion ${API_VERSION}, kind AdmissionReview; got ${shown(doc.apiVersion)}, ${shown(doc.kind)}`);
  }
  const r = doc.request;
  if (!isRecord(r)) throw new ReviewError('the review has no request');
  const uid = typeof r.uid === 'string' && r.uid.length > 0 && r.uid.length <= 128 ? r.uid : undefined;
  if (!uid) throw new ReviewError('request.uid is missing or not a short string');
  const kind = r.kind;
  if (!isRecord(kind) || typeof kind.kind !== 'string' || typeof kind.group !== 'string' || typeof kind.version !== 'string') {
    throw new ReviewError('request.kind must carry group, version and kind', uid);
  }
  if (typeof r.operation !== 'string') throw new ReviewError('request.operation is missing', uid);
  for (const k of ['object', 'oldObject'] as const) {
    const deep = tooDeep(r[k], MAX_DEPTH);
    if (deep !== undefined) throw new ReviewError(`request.${k}${deep}: nested deeper than ${MAX_DEPTH} levels, which no Kubernetes object of the served kinds is`, uid);
  }
  return {
    uid, operation: r.operation, object: r.object, ...(r.oldObject !== undefined ? { oldObject: r.oldObject } : {}),
    kind: { group: kind.group, version: kind.version, kind: kind.kind },
    ...(typeof r.namespace === 'string' ? { namespace: r.namespace } : {}),
    ...(typeof r.name === 'string' ? { name: r.name } : {}),
    ...(typeof r.subResource === 'string' ? { subResource: r.subResource } : {}),
  };
}

/**
 * Deepest nesting an object may have. The deepest field of a CronJob's pod template (a
 * label selector's values inside an affinity term) is 16 levels down, and managedFields
 * mirror that depth; every later step may then walk an object recursively.
 */
export const MAX_DEPTH = 100;

/**
 * Where `v` first nests deeper than `max` (a field path relative to it, its first 12 steps),
 * or undefined. Iterative: the value may be nested far deeper than the stack allows.
 */
export function tooDeep(v: unknown, max: number): string | undefined {
  type At = { v: unknown; depth: number; key?: string | number; up?: At };
  const stack: At[] = [{ v, depth: 0 }];
  while (stack.length > 0) {
    const at = stack.pop()!;
    if (typeof at.v !== 'object' || at.v === null) continue;
    if (at.depth >= max) {
      const keys: (string | number)[] = [];
      for (let p: At | undefined = at; p?.key !== undefined; p = p.up) keys.unshift(p.key);
      const step = (k: string | number) => (typeof k === 'number' ? `[${k}]` : /^[A-Za-z0-9_-]{1,63}$/.test(k) ? `.${k}` : `[${describe(k)}]`);
      return keys.slice(0, 12).map(step).join('') + (keys.length > 12 ? `... (${keys.length} levels)` : '');
    }
    if (Array.isArray(at.v)) at.v.forEach((x, i) => stack.push({ v: x, depth: at.depth + 1, key: i, up: at }));
    else for (const [k, x] of Object.entries(at.v)) stack.push({ v: x, depth: at.depth + 1, key: k, up: at });
  }
  return undefined;
}

/** Every kind the webhook rewrites (the values of its metrics' kind label, with 'other'). */
export const SERVED_KINDS: readonly string[] = WORKLOAD_KINDS.map((w) => w.kind);

/** True for the kinds the webhook rewrites (a group like "constructor" matches no row). */
export function isServed(kind: AdmissionRequest['kind']): boolean {
  return workloadKind(kind.group, kind.kind) !== undefined;
}

/**
 * What one request asks of the webhook, decided once: nothing (a kind it does not serve, or
 * neither CREATE nor UPDATE), or the mutation of one object, with its pod spec already scanned
 * and, for a Pod being created whose spec reads a value of the controller chain, the
 * namespace and owners whose chain is read before admit().
 */
export type AdmissionPlan =
  | { act: 'none' }
  | { act: 'mutate'; kind: string; object: Record<string, unknown>; options: MutateOptions; chain?: { namespace: string; owners: OwnerReference[] } };

/** The plan for a request. One of the operations served without an object is malformed (an API server always sends it): a ReviewError. */
export function plan(req: AdmissionRequest): AdmissionPlan {
  if (!isServed(req.kind) || (req.operation !== 'CREATE' && req.operation !== 'UPDATE')) return { act: 'none' };
  if (!isRecord(req.object)) {
    const what = req.object === undefined ? 'missing' : req.object === null ? 'null' : Array.isArray(req.object) ? 'a list' : `a ${typeof req.object}`;
    throw new ReviewError(`request.object is ${what}: a ${req.operation} of a ${displayName(req.kind.kind)} carries the object`, req.uid);
  }
  const kind = req.kind.kind;
  if (kind === 'Pod' && req.subResource === 'ephemeralcontainers') {
    const options: MutateOptions = { ephemeralOnly: { existing: ephemeralNames(req.oldObject) } };
    return { act: 'mutate', kind, object: req.object, options: { ...options, scanned: scanned(kind, req.object, options)! } };
  }
  // Only a CREATE sets a Pod's annotations (the registration sends no other, but an UPDATE
  // must never put admission's Pending over the agent's values).
  const update = req.operation !== 'CREATE';
  const scan = scanned(kind, req.object, { update })!;
  const options: MutateOptions = { update, namespace: req.namespace ?? '', scanned: scan };
  // The chain's namespace is the request's, which the API server sets: the object's
  // metadata.namespace is the author's, may be absent, and would have the webhook read
  // another namespace's owners. Without it (never, for a Pod), no namespace to trust.
  if (!scan.creating || req.subResource !== undefined || !req.namespace || !scan.reads.some((k) => CHAIN_KEYS.has(k))) {
    return { act: 'mutate', kind, object: req.object, options };
  }
  const meta = isRecord(req.object.metadata) ? req.object.metadata : {};
  const owners = Array.isArray(meta.ownerReferences) ? meta.ownerReferences.filter((o): o is OwnerReference => isRecord(o) && typeof o.uid === 'string' && typeof o.name === 'string') : [];
  return { act: 'mutate', kind, object: req.object, options, chain: { namespace: req.namespace, owners } };
}

/** The mutation a plan makes, with the chain read for it when it needed one. */
export function admit(p: AdmissionPlan, opts: Pick<MutateOptions, 'chain'> = {}): Mutation {
  return p.act === 'none' ? unchanged() : mutate(p.kind, p.object, { ...p.options, ...opts });
}

/** The names of a pod's ephemeral containers (its old object: those the API server forbids changing). */
function ephemeralNames(pod: unknown): Set<string> {
  const spec = isRecord(pod) ? pod.spec : undefined;
  const list = isRecord(spec) && Array.isArray(spec.ephemeralContainers) ? spec.ephemeralContainers as unknown[] : [];
  return new Set(list.flatMap((c) => (isRecord(c) && typeof c.name === 'string' ? [c.name] : [])));
}

export function reviewOf(response: AdmissionResponse): string {
  return JSON.stringify({ apiVersion: API_VERSION, kind: 'AdmissionReview', response });
}

export function responseFor(uid: string, m: Mutation): AdmissionResponse {
  if (!m.allowed) return { uid, allowed: false, status: { code: 422, message: m.message } };
  const r: AdmissionResponse = { uid, allowed: true };
  if (m.patch.length > 0) {
    r.patchType = 'JSONPatch';
    r.patch = Buffer.from(JSON.stringify(m.patch)).toString('base64');
  }
  if (m.warnings.length > 0) r.warnings = m.warnings;
  return r;
}
