// The rewrite of one pod spec that makes KEP-4753's syntax valid on today's API servers.
// Pure: a spec in, JSON Patch operations (relative to the spec) or refusals out.
//
//   volumes  A downwardAPI volume with a metadata.ownerReferences item becomes a read-only
//            ownerrefs.dev CSI inline volume whose attribute `downwardAPI` is the volume
//            source, every item kept (the agent renders them all, projections/downwardapi.ts).
//            A projected volume qualifies when all its sources are downwardAPI: their items,
//            in order, with the projected defaultMode. Mixed with anything else it is refused.
//   env      valueFrom.fieldRef metadata.ownerReferences, in containers, init containers and
//            ephemeral containers:
//              in a Pod       a literal value, the KEP JSON of the pod's owners;
//              in a template  a fieldRef to the annotation TEMPLATE_ENV_ANNOTATION, which the
//                             API server accepts; each pod made from the template then
//                             comes back here, and that fieldRef becomes the literal.
//
// Everything here is pod-author input: it is validated before it is moved (the API
// server's validation never sees the moved items), and what cannot be served is refused
// with a message that says what to write instead.

import { AGENT_FIELDS, checkFieldRef, checkSource, OWNER_REFERENCES_FIELD, type DownwardAPISource } from '../../projections/downwardapi.ts';
import { renderOwnerReferencesJson } from '../../projections/ownerreferences.ts';
import type { OwnerReference } from '../../projections/types.ts';
import { describe } from '../common/validation.ts';
import { DRIVER_NAME } from '../csi/driver.ts';
import { DOWNWARD_API_ATTRIBUTE } from '../volume/resolve.ts';

/** The annotation a template's env points at; only this webhook ever resolves it. */
export const TEMPLATE_ENV_ANNOTATION = 'ownerrefs.dev/owner-references';
export const TEMPLATE_ENV_FIELD = `metadata.annotations['${TEMPLATE_ENV_ANNOTATION}']`;



export type PatchOp = { op: 'replace' | 'add'; path: string; value: unknown };

export interface SpecRewrite {
  ops: PatchOp[];
  /** Field path -> why it cannot be served (the request is denied). */
  refusals: string[];
  /** What was rewritten, for the log line and `inject`'s summary. */
  changed: string[];
}

type Json = Record<string, unknown>;

function isRecord(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** JSON Pointer escaping (RFC 6901). */
export function pointer(...parts: (string | number)[]): string {
  return parts.map((p) => '/' + String(p).replaceAll('~', '~0').replaceAll('/', '~1')).join('');
}

/** A downwardAPI source naming a field only the agent serves (the KEP's, or ours beyond it). */
function hasOwnersItem(src: unknown): boolean {
  return isRecord(src) && list(src.items).some((i) => isRecord(i) && isRecord(i.fieldRef) && AGENT_FIELDS.includes(i.fieldRef.fieldPath as string));
}

/** True when the spec uses the KEP syntax anywhere (or a template's env encoding, when `templateEnv`). */
export function mentionsOwnerReferences(spec: unknown, templateEnv = true): boolean {
  if (!isRecord(spec)) return false;
  const envHit = (e: unknown) => isRecord(e) && isRecord(e.valueFrom) && isRecord(e.valueFrom.fieldRef) &&
    (e.valueFrom.fieldRef.fieldPath === OWNER_REFERENCES_FIELD || (templateEnv && e.valueFrom.fieldRef.fieldPath === TEMPLATE_ENV_FIELD));
  const containers = ['containers', 'initContainers', 'ephemeralContainers'].flatMap((k) => list(spec[k]));
  if (containers.some((c) => isRecord(c) && list(c.env).some(envHit))) return true;
  return list(spec.volumes).some((v) => isRecord(v) && (hasOwnersItem(v.downwardAPI) ||
    (isRecord(v.projected) && list(v.projected.sources).some((s) => isRecord(s) && hasOwnersItem(s.downwardAPI)))));
}

export interface RewriteContext {
  /** A Pod (literal env) or a pod template (annotation-backed env). */
  template: boolean;
  /** The pod's owners (Pods only). */
  owners: readonly OwnerReference[];
  /** Where the spec sits, for messages: "spec", "spec.template.spec". */
  at: string;
  /**
   * Only the ephemeral containers being added (an UPDATE of pods/ephemeralcontainers,
   * `kubectl debug`), not these, already in the pod: that subresource may change nothing
   * else, so a patch elsewhere would fail the update.
   */
  ephemeralOnly?: { existing: ReadonlySet<string> };
}

type Ctx = RewriteContext & { ownersJson(): string };

/**
 * A key or name from the manifest, for a message: as it is when it looks like a field name,
 * else quoted and bounded (describe). A hostile author controls it, and kubectl prints it.
 */
function field(k: string): string {
  return /^[A-Za-z0-9_.\/-]{1,63}$/.test(k) ? k : describe(k);
}

/** At most five of them, distinct, and how many more. */
function fields(ks: readonly string[]): string {
  const distinct = [...new Set(ks)];
  return distinct.slice(0, 5).map(field).join(', ') + (distinct.length > 5 ? ` (and ${distinct.length - 5} more)` : '');
}

export function rewriteSpec(spec: unknown, context: RewriteContext): SpecRewrite {
  const out: SpecRewrite = { ops: [], refusals: [], changed: [] };
  if (!isRecord(spec)) return out;
  // Rendered once: every KEP env entry of a Pod gets the same literal.
  let ownersJson: string | undefined;
  const ctx: Ctx = { ...context, ownersJson: () => (ownersJson ??= renderOwnerReferencesJson(context.owners)) };
  const names = new Set(['containers', 'initContainers'].flatMap((k) => list(spec[k])).flatMap((c) => (isRecord(c) && typeof c.name === 'string' ? [c.name] : [])));
  if (!ctx.ephemeralOnly) {
    list(spec.volumes).forEach((v, i) => {
      if (isRecord(v)) rewriteVolume(v, i, names, ctx, out);
    });
  }
  for (const kind of ctx.ephemeralOnly ? ['ephemeralContainers'] : ['containers', 'initContainers', 'ephemeralContainers']) {
    list(spec[kind]).forEach((c, ci) => {
      if (!isRecord(c) || (kind === 'ephemeralContainers' && typeof c.name === 'string' && ctx.ephemeralOnly?.existing.has(c.name))) return;
      list(c.env).forEach((e, ei) => {
        if (isRecord(e)) rewriteEnv(e, [kind, ci, 'env', ei], typeof c.name === 'string' ? field(c.name) : String(ci), ctx, out);
      });
    });
  }
  return out;
}

function rewriteVolume(v: Json, i: number, containers: ReadonlySet<string>, ctx: Ctx, out: SpecRewrite): void {
  const at = `${ctx.at}.volumes[${i}]`;
  let source: Json | undefined;
  /** The source that becomes the CSI volume's attribute; any other beside it is refused. */
  let moved: 'downwardAPI' | 'projected';
  if (hasOwnersItem(v.downwardAPI)) {
    moved = 'downwardAPI';
    source = v.downwardAPI as Json;
    out.refusals.push(...checkSource(source, `${at}.downwardAPI`, containers));
  } else if (isRecord(v.projected) && list(v.projected.sources).some((s) => isRecord(s) && hasOwnersItem(s.downwardAPI))) {
    const sources = list(v.projected.sources);
    const others = sources.flatMap((s) => (isRecord(s) ? Object.keys(s).filter((k) => k !== 'downwardAPI') : ['?']));
    if (others.length > 0) {
      out.refusals.push(`${at}.projected: a projected volume that mixes metadata.ownerReferences with ${fields(others)} cannot be served: ` +
        `the owner file is kept by the ownerrefs.dev CSI driver, the other sources by the kubelet. Move the metadata.ownerReferences item into a volume of its own ` +
        `(downwardAPI: {items: [{path: ownerReferences, fieldRef: {fieldPath: metadata.ownerReferences}}]}) and mount it beside this one (a subPath mount if it must share a directory)`);
      return;
    }
    moved = 'projected';
    const items = sources.flatMap((s) => list((s as Json).downwardAPI && ((s as Json).downwardAPI as Json).items));
    source = { items, ...(v.projected.defaultMode === undefined ? {} : { defaultMode: v.projected.defaultMode }) };
    out.refusals.push(...checkSource(source, `${at}.projected`, containers), ...duplicatePaths(items, `${at}.projected`));
    for (const [si, s] of sources.entries()) {
      const extra = Object.keys(((s as Json).downwardAPI ?? {}) as Json).filter((k) => k !== 'items');
      if (extra.length > 0) out.refusals.push(`${at}.projected.sources[${si}].downwardAPI: unknown field ${field(extra[0]!)}`);
    }
    const extra = Object.keys(v.projected).filter((k) => k !== 'sources' && k !== 'defaultMode');
    if (extra.length > 0) out.refusals.push(`${at}.projected: unknown field ${field(extra[0]!)}`);
  }
  if (!source) return;
  // A server-side apply of the same manifest merges its downwardAPI source into the stored
  // volume, which holds our own csi source from the first apply: that one is replaced. Any
  // other source (a projected one beside a downwardAPI one too) is refused, never dropped:
  // the API server's own check for one source only sees the rewritten volume.
  const ours = (k: string) => k === 'csi' && isRecord(v.csi) && v.csi.driver === DRIVER_NAME;
  const kept = Object.keys(v).filter((k) => k !== 'name' && k !== moved && !ours(k));
  if (kept.length > 0) out.refusals.push(`${at}: a volume has exactly one source; ${fields(kept)} cannot be kept beside it`);
  const attribute = JSON.stringify(source as DownwardAPISource);
  out.ops.push({
    op: 'replace', path: pointer('volumes', i),
    value: { name: v.name, csi: { driver: DRIVER_NAME, readOnly: true, volumeAttributes: { [DOWNWARD_API_ATTRIBUTE]: attribute } } },
  });
  out.changed.push(`volume ${typeof v.name === 'string' ? field(v.name) : String(i)}`);
}

/**
 * A projected volume's item paths must differ across all its sources: the API server's
 * "conflicting duplicate paths", which compares them as written ("a" and "./a" pass).
 */
function duplicatePaths(items: unknown[], at: string): string[] {
  const seen = new Set<string>();
  const dup = new Set<string>();
  for (const item of items) {
    if (!isRecord(item) || typeof item.path !== 'string' || item.path === '') continue;
    if (seen.has(item.path)) dup.add(item.path);
    seen.add(item.path);
  }
  return [...dup].slice(0, 3).map((p) => `${at}: conflicting duplicate paths: ${field(p)} is given by more than one item`);
}

function rewriteEnv(e: Json, where: (string | number)[], container: string, ctx: Ctx, out: SpecRewrite): void {
  const ref = isRecord(e.valueFrom) ? e.valueFrom.fieldRef : undefined;
  if (!isRecord(ref)) return;
  const kep = ref.fieldPath === OWNER_REFERENCES_FIELD;
  // A template's encoding stays as it is in a template; in a Pod it becomes the literal.
  if (!kep && !(ref.fieldPath === TEMPLATE_ENV_FIELD && !ctx.template)) return;
  const at = `${ctx.at}.${where[0]}[${where[1]}].env[${where[3]}]`;
  const errs = kep ? checkFieldRef(ref, `${at}.valueFrom.fieldRef`) : [];
  const extra = Object.keys(e.valueFrom as Json).filter((k) => k !== 'fieldRef');
  if (extra.length > 0 || e.value !== undefined) errs.push(`${at}: valueFrom.fieldRef cannot be combined with ${fields([...extra, ...(e.value !== undefined ? ['value'] : [])])}`);
  if (errs.length > 0) return void out.refusals.push(...errs);
  const value = ctx.template
    ? { name: e.name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: TEMPLATE_ENV_FIELD } } }
    : { name: e.name, value: ctx.ownersJson() };
  out.ops.push({ op: 'replace', path: pointer(...where), value });
  out.changed.push(`env ${container}/${typeof e.name === 'string' ? field(e.name) : String(where[3])}`);
}
