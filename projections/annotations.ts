// The pod annotations the kubelet renders for KEP-4753's syntax: the admission webhook
// points `fieldRef: metadata.ownerReferences` (and our extension field paths) at one of
// these annotations, sets it when the pod is created, and the agent keeps it current. The
// kubelet then renders volumes and env from the annotation as it renders any annotation
// (`..data` swap, fsGroup, projected volumes, env at each container start). Pure: which
// annotations a pod spec reads, and the value of each for a pod.
//
//   field path the author writes             annotation                                  value
//   metadata.ownerReferences                 ownerrefs.dev/owner-references              the KEP document
//   ownerrefs.dev/controllerChain            ownerrefs.dev/controller-chain              chain.ts's ControllerChain
//   ownerrefs.dev/workloadOwnerReferences    ownerrefs.dev/workload-owner-references     the chain's top, ready to paste
//   ownerrefs.dev/nodeOwnerReferences        ownerrefs.dev/node-owner-references         the pod's Node, ready to paste
//
// and, read as written (`metadata.annotations['ownerrefs.dev/workload-name']`), the workload's
// identity as plain values (workload.ts): workload-kind, -name, -uid (the top of the chain),
// controller-kind, -name, -uid (the pod's own controller), and otel-resource-attributes.

import { isSettled, renderChainJson, unsettledEndOfChainJson, UNSETTLED_END_NAMES, type ChainEnd, renderNodeOwnerJson, renderWorkloadJson, type ControllerChain, type NodeRef } from './chain.ts';
import { renderOwnerReferencesJson } from './ownerreferences.ts';
import { controllerOf, otelResourceAttributes, unresolved, workloadOf } from './workload.ts';
import { isRecord, type OwnerReference } from './types.ts';
import { ANNOTATION_KEYS, ANNOTATION_VOLUME, ANNOTATIONS, annotationField, EXTENSION_FIELDS, OWNER_REFERENCES_FIELD, type AnnotationKey } from './names.ts';

/** The annotations whose value comes from the controller chain (walked: owners are read). */
export const CHAIN_KEYS: ReadonlySet<AnnotationKey> = new Set([ANNOTATIONS.chain, ANNOTATIONS.workload, ANNOTATIONS.workloadKind, ANNOTATIONS.workloadName,
  ANNOTATIONS.workloadUid, ANNOTATIONS.otel]);

/** Field paths the API server refuses, each with the annotation the webhook points it at. */
export const REWRITTEN_FIELDS: Readonly<Record<string, AnnotationKey>> = {
  [OWNER_REFERENCES_FIELD]: ANNOTATIONS.ownerReferences,
  [EXTENSION_FIELDS.chain]: ANNOTATIONS.chain,
  [EXTENSION_FIELDS.workload]: ANNOTATIONS.workload,
  [EXTENSION_FIELDS.node]: ANNOTATIONS.node,
};

/** Every field path that reads one of our annotations, with its key. */
const READ_FIELDS: ReadonlyMap<string, AnnotationKey> = new Map(ANNOTATION_KEYS.map((k) => [annotationField(k), k]));

/** The annotation a field path reads: ours (rewritten or as written), or undefined. */
export function annotationRead(fieldPath: unknown): AnnotationKey | undefined {
  if (typeof fieldPath !== 'string') return undefined;
  return Object.hasOwn(REWRITTEN_FIELDS, fieldPath) ? REWRITTEN_FIELDS[fieldPath] : READ_FIELDS.get(fieldPath);
}

/** `metadata.annotations['ownerrefs.dev/...']` with a key that is none of ours (a typo, most likely), or undefined. */
export function unknownAnnotationRead(fieldPath: unknown): string | undefined {
  if (typeof fieldPath !== 'string') return undefined;
  const m = /^metadata\.annotations\['(ownerrefs\.dev\/[^']*)'\]$/.exec(fieldPath);
  return m && !READ_FIELDS.has(fieldPath) && m[1] !== ANNOTATION_VOLUME ? m[1] : undefined;
}

type Json = Record<string, unknown>;
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/**
 * Every fieldRef of a pod spec, with where it is: env of containers, init and ephemeral
 * containers; downwardAPI volume items; projected volumes' downwardAPI items. The places
 * the downward API can appear, in this order.
 */
export function* fieldRefs(spec: unknown): Generator<{ ref: Json; where: (string | number)[] }> {
  if (!isRecord(spec)) return;
  for (const kind of ['containers', 'initContainers', 'ephemeralContainers']) {
    for (const [ci, c] of list(spec[kind]).entries()) {
      if (!isRecord(c)) continue;
      for (const [ei, e] of list(c.env).entries()) {
        if (isRecord(e) && isRecord(e.valueFrom) && isRecord(e.valueFrom.fieldRef)) yield { ref: e.valueFrom.fieldRef, where: [kind, ci, 'env', ei, 'valueFrom', 'fieldRef'] };
      }
    }
  }
  for (const [vi, v] of list(spec.volumes).entries()) {
    if (!isRecord(v)) continue;
    if (isRecord(v.downwardAPI)) {
      for (const [ii, item] of list(v.downwardAPI.items).entries()) {
        if (isRecord(item) && isRecord(item.fieldRef)) yield { ref: item.fieldRef, where: ['volumes', vi, 'downwardAPI', 'items', ii, 'fieldRef'] };
      }
    }
    if (isRecord(v.projected)) {
      for (const [si, src] of list(v.projected.sources).entries()) {
        if (!isRecord(src) || !isRecord(src.downwardAPI)) continue;
        for (const [ii, item] of list(src.downwardAPI.items).entries()) {
          if (isRecord(item) && isRecord(item.fieldRef)) yield { ref: item.fieldRef, where: ['volumes', vi, 'projected', 'sources', si, 'downwardAPI', 'items', ii, 'fieldRef'] };
        }
      }
    }
  }
}

/** The annotations of ours a pod spec reads, in ANNOTATION_KEYS order. */
export function annotationsRead(spec: unknown): AnnotationKey[] {
  return annotationsReadBy(fieldRefs(spec));
}

/** The same, from fieldRefs already found (the webhook walks a spec's fieldRefs once per review). */
export function annotationsReadBy(refs: Iterable<{ ref: Json }>): AnnotationKey[] {
  const read = new Set<AnnotationKey>();
  for (const { ref } of refs) {
    const key = annotationRead(ref.fieldPath);
    if (key) read.add(key);
  }
  return ANNOTATION_KEYS.filter((k) => read.has(k));
}

/** What an annotation's value needs beyond the pod: its Node, its controller chain (either may be unknown). */
export interface AnnotationContext {
  node?: NodeRef | undefined;
  /** Undefined: not walked here (a node that does not follow owners leaves the chain as admission set it). */
  chain?: ControllerChain | undefined;
}

/**
 * One annotation's value for the pod, or undefined when it cannot be known here (the Node
 * before the pod is bound; the chain where no one walks it): a value in place then stays. An unsettled value (a chain whose next owner is still being
 * read, or failing to be read) is written only where the pod has no value yet: a value in
 * place stays, so an agent restart or an API server hiccup never blanks a known workload.
 */
export interface AnnotationValue {
  value: string;
  settled: boolean;
}

export function annotationValue(key: AnnotationKey, owners: readonly OwnerReference[], ctx: AnnotationContext): AnnotationValue | undefined {
  switch (key) {
    case ANNOTATIONS.ownerReferences:
      return { value: renderOwnerReferencesJson(owners), settled: true };
    case ANNOTATIONS.node:
      return ctx.node ? { value: renderNodeOwnerJson(ctx.node), settled: true } : undefined;
    case ANNOTATIONS.controllerKind:
      return { value: controllerOf(owners).kind, settled: true };
    case ANNOTATIONS.controllerName:
      return { value: controllerOf(owners).name, settled: true };
    case ANNOTATIONS.controllerUid:
      return { value: controllerOf(owners).uid, settled: true };
    default: {
      const chain = ctx.chain;
      if (!chain) return undefined;
      return { value: chainValue(key, chain), settled: isSettled(chain) };
    }
  }
}

function chainValue(key: AnnotationKey, chain: ControllerChain): string {
  switch (key) {
    case ANNOTATIONS.chain: return renderChainJson(chain);
    case ANNOTATIONS.workload: return renderWorkloadJson(chain);
    case ANNOTATIONS.workloadKind: return workloadOf(chain).kind;
    case ANNOTATIONS.workloadName: return workloadOf(chain).name;
    case ANNOTATIONS.workloadUid: return workloadOf(chain).uid;
    default: return otelResourceAttributes(chain);
  }
}

/**
 * May `want`, an unsettled value ending in `reason`, replace `have`? Only where `have` too says
 * only how far a reader got, and `reason` is an error other than its own (as the chain file,
 * keepWhileUnsettled). The workload list and the OpenTelemetry attributes cannot tell: they stay.
 */
function replacesUnsettled(key: AnnotationKey, have: string, reason: ChainEnd): boolean {
  if (reason === 'Pending') return false;
  let was: string | undefined;
  switch (key) {
    case ANNOTATIONS.chain: was = unsettledEndOfChainJson(have); break;
    case ANNOTATIONS.workloadKind: case ANNOTATIONS.workloadName: case ANNOTATIONS.workloadUid:
      was = UNSETTLED_END_NAMES.find((r) => unresolved(r) === have); break;
    default: return false;
  }
  return was !== undefined && was !== reason;
}

/**
 * The annotations to write: for each key the pod reads, its value where it differs from the
 * one in place (`current`), except an unknown value, or an unsettled one over a value in place
 * (unless replacesUnsettled).
 */
export function annotationChanges(keys: readonly AnnotationKey[], owners: readonly OwnerReference[], ctx: AnnotationContext,
  current: Readonly<Record<string, string>> | null | undefined): Map<AnnotationKey, string> {
  const out = new Map<AnnotationKey, string>();
  for (const key of keys) {
    const want = annotationValue(key, owners, ctx);
    const have = current?.[key];
    if (!want || want.value === have || (!want.settled && have !== undefined && !replacesUnsettled(key, have, ctx.chain!.end.reason))) continue;
    out.set(key, want.value);
  }
  return out;
}
