// The workload's identity as plain values, from the pod's controller chain (chain.ts): what
// people put in env, logs and telemetry. Pure. Never a guess: a chain that did not reach its
// top names no workload.
//
//   workload    the top of the chain (a Deployment's pod: its Deployment; a CronJob's Job's
//               pod: its CronJob); "" for a pod no controller owns; "(unresolved: REASON)"
//               when the chain stops before its top, REASON its end (chain.ts: Pending,
//               Forbidden, NotFound, ...). No Kubernetes kind, name or UID has a space or "(".
//   controller  the pod's own controlling owner; "" for none. Always known: it is on the pod.
//   OpenTelemetry   OTEL_RESOURCE_ATTRIBUTES: k8s.<kind>.name and k8s.<kind>.uid (the semantic
//               conventions' resource attributes) for each item of the chain whose kind has
//               them, nearest first: only what is known, so a chain that stops early gives
//               its known part and names no workload above it. Values percent-encoded, as the
//               variable's W3C Baggage format asks (names and UIDs need none).

import type { ControllerChain } from './chain.ts';
import type { OwnerReference } from './types.ts';

export interface Identity {
  kind: string;
  name: string;
  uid: string;
}

const NONE: Identity = { kind: '', name: '', uid: '' };

export function unresolved(reason: string): string {
  return `(unresolved: ${reason})`;
}

/** The workload at the top of the chain, "" for none, or the chain's end when it stopped short. */
export function workloadOf(chain: ControllerChain): Identity {
  if (chain.end.reason === 'NoController') return NONE;
  const top = chain.items.at(-1);
  if (chain.end.reason === 'Top' && top) return { kind: top.kind, name: top.name, uid: top.uid };
  const u = unresolved(chain.end.reason);
  return { kind: u, name: u, uid: u };
}

/** The pod's own controlling owner. */
export function controllerOf(owners: readonly OwnerReference[]): Identity {
  const c = owners.find((o) => o.controller === true);
  return c ? { kind: c.kind, name: c.name, uid: c.uid } : NONE;
}

/**
 * Kinds with resource attributes in the OpenTelemetry semantic conventions (k8s.*), by their
 * API group: a kind of the same name in another group is not the built-in one.
 */
const OTEL_KINDS: Readonly<Record<string, string>> = {
  'apps/v1/ReplicaSet': 'replicaset',
  'apps/v1/Deployment': 'deployment',
  'apps/v1/StatefulSet': 'statefulset',
  'apps/v1/DaemonSet': 'daemonset',
  'batch/v1/Job': 'job',
  'batch/v1/CronJob': 'cronjob',
  'v1/ReplicationController': 'replicationcontroller',
};

/** OTEL_RESOURCE_ATTRIBUTES for the chain's known items, nearest first ("" for none). */
export function otelResourceAttributes(chain: ControllerChain): string {
  const out: string[] = [];
  for (const item of chain.items) {
    const key = Object.hasOwn(OTEL_KINDS, `${item.apiVersion}/${item.kind}`) ? OTEL_KINDS[`${item.apiVersion}/${item.kind}`] : undefined;
    if (!key) continue;
    out.push(`k8s.${key}.name=${encodeBaggage(item.name)}`, `k8s.${key}.uid=${encodeBaggage(item.uid)}`);
  }
  return out.join(',');
}

/** A W3C Baggage value: percent-encoded outside its octets (no controls, space, '"', ',', ';', '\\', '%'). */
function encodeBaggage(v: string): string {
  return [...new TextEncoder().encode(v)].map((b) =>
    b >= 0x21 && b <= 0x7e && b !== 0x22 && b !== 0x2c && b !== 0x3b && b !== 0x5c && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}
