// What the admission benchmarks (bench/admission.ts, bench/admissionparts.ts) share: the KEP
// pod in the form admission stores it, the least-work mutating policy, and the API server's
// admission metrics they read.

import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { ANNOTATIONS, annotationField } from '../../projections/names.ts';
import { renderOwnerReferencesJson } from '../../projections/ownerreferences.ts';

/** A KEP pod as admission stores it: its fields pointed at the annotation, which holds its owners. */
export function stored(pod: V1Pod): V1Pod {
  const at = annotationField(ANNOTATIONS.ownerReferences);
  const point = <T extends { fieldRef?: { fieldPath: string } }>(x: T): T => x.fieldRef?.fieldPath === 'metadata.ownerReferences' ? { ...x, fieldRef: { ...x.fieldRef, fieldPath: at } } : x;
  const spec = pod.spec!;
  return {
    ...pod,
    metadata: { ...pod.metadata, annotations: { [ANNOTATIONS.ownerReferences]: renderOwnerReferencesJson(pod.metadata!.ownerReferences!) } },
    spec: { ...spec, containers: spec.containers.map((c) => ({ ...c, env: c.env?.map((v) => v.valueFrom ? { ...v, valueFrom: point(v.valueFrom) } : v) })),
      volumes: spec.volumes!.map((v) => ({ ...v, downwardAPI: { ...v.downwardAPI, items: v.downwardAPI!.items!.map(point) } })) },
  };
}

/**
 * The least work a MutatingAdmissionPolicy can do, named `name`, bound to the namespaces
 * `namespaceSelector` selects: no condition, one annotation added (not one of ours, which the
 * writers' policy would refuse). What it costs is the API server's own price of any mutating
 * policy: the object made CEL's, the patch evaluated, the object encoded, patched and decoded.
 */
export const leastWorkPolicy = (name: string, namespaceSelector: Record<string, unknown>): KubernetesObject[] => [
  { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicy', metadata: { name }, spec: {
    matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }] },
    mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: "[JSONPatch{op: 'add', path: '/metadata/annotations/bench.example~1minimal', value: ''}]" } }],
    failurePolicy: 'Fail', reinvocationPolicy: 'Never' } } as KubernetesObject,
  { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicyBinding', metadata: { name },
    spec: { policyName: name, matchResources: { namespaceSelector } } } as KubernetesObject,
];

/** The sum of the series of `name` whose line holds every one of `labels`. */
export const sumWhere = (body: string, name: string, ...labels: string[]) => body.split('\n')
  .filter((l) => l.startsWith(`${name}{`) && labels.every((x) => l.includes(x)))
  .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

/** Seconds the API server has spent in admission plugin `plugin` on CREATEs, in all. */
export const pluginSeconds = (body: string, plugin: string) => sumWhere(body, 'apiserver_admission_controller_admission_duration_seconds_sum', `name="${plugin}"`, 'operation="CREATE"');

/** A mutating policy's own evaluations (its check, matchConditions not included): how many, seconds in all, and how many within 1 ms. */
export const policyChecks = (body: string, policy: string) => ({
  count: sumWhere(body, 'apiserver_mutating_admission_policy_check_duration_seconds_count', `policy="${policy}"`),
  seconds: sumWhere(body, 'apiserver_mutating_admission_policy_check_duration_seconds_sum', `policy="${policy}"`),
  within1ms: sumWhere(body, 'apiserver_mutating_admission_policy_check_duration_seconds_bucket', `policy="${policy}"`, 'le="0.001"'),
});
