// The rewrite of one pod spec that makes KEP-4753's syntax valid on today's API servers.
// Pure: a spec in, JSON Patch operations (relative to the spec) out.
//
// Each fieldRef whose fieldPath the API server refuses (metadata.ownerReferences, and our
// extension paths ownerrefs.dev/controllerChain, workloadOwnerReferences and
// nodeOwnerReferences) is pointed at the pod annotation that holds that value
// (projections/annotations.ts), wherever the downward API can appear: env of containers,
// init and ephemeral containers, downwardAPI volume items, and projected volumes' downwardAPI
// items beside any other source. Nothing else changes: the API server then validates every
// item as it validates any downward API item, and the kubelet renders it.

import { annotationRead, fieldRefs, REWRITTEN_FIELDS, unknownAnnotationRead } from '../../../projections/annotations.ts';
import { describe } from '../../common/validation.ts';
import { ANNOTATION_KEYS, ANNOTATIONS, annotationField } from '../../../projections/names.ts';

export type PatchOp = { op: 'replace' | 'add'; path: string; value: unknown } | { op: 'remove'; path: string };

export interface SpecRewrite {
  ops: PatchOp[];
  /** What was rewritten, for the log line and `inject`'s summary. */
  changed: string[];
  /** Told to the user (kubectl prints admission warnings); nothing is refused. */
  warnings: string[];
}

export interface RewriteContext {
  /**
   * Only the ephemeral containers being added (an UPDATE of pods/ephemeralcontainers,
   * `kubectl debug`), not these, already in the pod: that subresource may change nothing
   * else, so a patch elsewhere would fail the update.
   */
  ephemeralOnly?: { existing: ReadonlySet<string> };
}

/** JSON Pointer escaping (RFC 6901). */
export function pointer(...parts: (string | number)[]): string {
  return parts.map((p) => '/' + String(p).replaceAll('~', '~0').replaceAll('/', '~1')).join('');
}

/**
 * A key or name from the manifest, for a message: as it is when it looks like a field name,
 * else quoted and bounded (describe). A hostile author controls it, and kubectl prints it.
 */
function field(k: unknown): string {
  return typeof k === 'string' && /^[A-Za-z0-9_.\/-]{1,63}$/.test(k) ? k : describe(String(k));
}

/** A pod spec with its fieldRefs, found once: every later question about the spec reads this list. */
export interface ScannedSpec {
  spec: unknown;
  refs: readonly FieldRefAt[];
}
type FieldRefAt = ReturnType<typeof fieldRefs> extends Iterable<infer T> ? T : never;

export function scanSpec(spec: unknown): ScannedSpec {
  return { spec, refs: [...fieldRefs(spec)] };
}

/** True when the spec has a fieldRef that only the rewrite makes valid. */
export function usesKepSyntax({ refs }: ScannedSpec): boolean {
  return refs.some(({ ref }) => typeof ref.fieldPath === 'string' && Object.hasOwn(REWRITTEN_FIELDS, ref.fieldPath));
}

export function rewriteSpec({ spec, refs }: ScannedSpec, ctx: RewriteContext = {}): SpecRewrite {
  const out: SpecRewrite = { ops: [], changed: [], warnings: [] };
  const isNewEphemeral = (where: (string | number)[]) => {
    const c = (spec as { ephemeralContainers?: { name?: unknown }[] }).ephemeralContainers?.[where[1] as number];
    return where[0] === 'ephemeralContainers' && !(typeof c?.name === 'string' && ctx.ephemeralOnly?.existing.has(c.name));
  };
  for (const { ref, where } of refs) {
    if (ctx.ephemeralOnly && !isNewEphemeral(where)) continue;
    const unknown = unknownAnnotationRead(ref.fieldPath);
    if (unknown !== undefined) {
      // Short (the API server may truncate a warning past 256 characters): the nearest key, not the list.
      out.warnings.push(`${at(spec, where)} reads the annotation ${field(unknown)}, which ownerrefs.dev does not set: did you mean ${nearest(unknown)}?`);
    }
    // The agent sets the Node's annotation once the pod is bound, after admission: env, read
    // at the container's start, would most often be empty. Ephemeral containers start later.
    if (where[2] === 'env' && where[0] !== 'ephemeralContainers' && annotationRead(ref.fieldPath) === ANNOTATIONS.node) {
      out.warnings.push(`${at(spec, where)} reads ${ANNOTATIONS.node}, which is set only after the pod is bound to a node, so env most often gets it empty: read it from a downwardAPI volume instead`);
    }
    if (typeof ref.fieldPath !== 'string' || !Object.hasOwn(REWRITTEN_FIELDS, ref.fieldPath)) continue;
    out.ops.push({ op: 'replace', path: pointer(...where, 'fieldPath'), value: annotationField(REWRITTEN_FIELDS[ref.fieldPath]!) });
    out.changed.push(at(spec, where));
  }
  return out;
}

const OTEL_ENV = 'OTEL_RESOURCE_ATTRIBUTES';

/**
 * OpenTelemetry's operator (and injectors like it) extends OTEL_RESOURCE_ATTRIBUTES's value
 * whether or not it has a valueFrom; with both, the API server refuses the pod. Said of any
 * spec that reads one of our annotations that way, a workload's template included.
 */
export function otelWarnings({ spec, refs }: ScannedSpec): string[] {
  return refs.filter(({ ref, where }) => where[2] === 'env' && envName(spec, where) === OTEL_ENV && annotationRead(ref.fieldPath) !== undefined)
    .map(({ where }) => `${at(spec, where)} reads an ownerrefs.dev annotation through valueFrom: an injector that extends ${OTEL_ENV} (the OpenTelemetry operator) ` +
      `makes the pod invalid; read it into a variable of its own and set ${OTEL_ENV} to "$(THAT_VARIABLE)" (docs/usage/workload-identity.md)`);
}

/** The name of the env var at `where` (an env fieldRef's place). */
function envName(spec: unknown, where: (string | number)[]): unknown {
  const s = spec as Record<string, { env?: { name?: unknown }[] }[]>;
  return s[where[0] as string]?.[where[1] as number]?.env?.[where[3] as number]?.name;
}

/** Where a fieldRef is, for people: `env app/OWNERS`, `volume podinfo item ownerReferences`. */
function at(spec: unknown, where: (string | number)[]): string {
  const s = spec as Record<string, { name?: unknown; env?: { name?: unknown }[]; downwardAPI?: { items?: { path?: unknown }[] }; projected?: { sources?: { downwardAPI?: { items?: { path?: unknown }[] } }[] } }[]>;
  if (where[2] === 'env') {
    const c = s[where[0] as string]![where[1] as number]!;
    return `env ${field(c.name ?? where[1])}/${field(c.env![where[3] as number]!.name ?? where[3])}`;
  }
  const v = s.volumes![where[1] as number]!;
  const item = where[2] === 'downwardAPI' ? v.downwardAPI!.items![where[4] as number]! : v.projected!.sources![where[4] as number]!.downwardAPI!.items![where[7] as number]!;
  return `volume ${field(v.name ?? where[1])} item ${field(item.path ?? '?')}`;
}

/** The known annotation nearest to `key` by edit distance (a typo's likely meaning). */
function nearest(key: string): string {
  const distance = (a: string, b: string): number => {
    let row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row = next;
    }
    return row[b.length]!;
  };
  const k = key.slice(0, 256); // pod-author input: bounded before the quadratic walk
  return ANNOTATION_KEYS.reduce((best, c) => (distance(k, c) < distance(k, best) ? c : best));
}
