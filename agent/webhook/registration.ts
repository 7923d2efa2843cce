// The MutatingWebhookConfiguration, built here so that the manifest in the repository,
// the tests and the code agree on one object (a test compares deploy/webhook.yaml with it).
//
// matchConditions make the API server call the webhook only for objects that use the KEP
// syntax, and for Pods whose spec reads one of our annotations (a workload's pods, once the
// webhook rewrote its template): every other pod is admitted without waiting on the webhook,
// and without it when it is down. For the objects that match, failurePolicy is Fail: without
// the rewrite the API server refuses the KEP syntax, and a pod admitted without its annotation
// would start with an empty value.

import { REWRITTEN_FIELDS } from '../../projections/annotations.ts';
import { ANNOTATION_KEYS, annotationField } from '../../projections/names.ts';

export const CONFIG_NAME = 'ownerrefs.dev';
export const WEBHOOK_NAMESPACE = 'ownerrefs-system';
export const TIMEOUT_SECONDS = 5;
/** The one path the webhook serves (POST an AdmissionReview). */
export const MUTATE_PATH = '/mutate';

const q = (s: string) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/** CEL: does the pod spec at `s` have a fieldRef with one of `paths`, in env or a downwardAPI or projected volume item? */
export function specUses(s: string, paths: readonly string[]): string {
  const fields = `[${paths.map(q).join(', ')}]`;
  const env = (list: string) =>
    `(has(${s}.${list}) && ${s}.${list}.exists(c, has(c.env) && c.env.exists(e, has(e.valueFrom) && has(e.valueFrom.fieldRef) && e.valueFrom.fieldRef.fieldPath in ${fields})))`;
  const items = (src: string) => `has(${src}.items) && ${src}.items.exists(i, has(i.fieldRef) && i.fieldRef.fieldPath in ${fields})`;
  const volumes = `(has(${s}.volumes) && ${s}.volumes.exists(v, (has(v.downwardAPI) && ${items('v.downwardAPI')}) || ` +
    `(has(v.projected) && has(v.projected.sources) && v.projected.sources.exists(p, has(p.downwardAPI) && ${items('p.downwardAPI')}))))`;
  return [env('containers'), env('initContainers'), env('ephemeralContainers'), volumes].join(' || ');
}

/** Field paths only the rewrite makes valid; and those, plus the annotations they become, for Pods. */
const KEP_PATHS = Object.keys(REWRITTEN_FIELDS);
const POD_PATHS = [...KEP_PATHS, ...ANNOTATION_KEYS.map(annotationField)];

/** The expression for each webhook of the configuration. */
export const MATCH = {
  pods: `has(object.spec) && (${specUses('object.spec', POD_PATHS)})`,
  templates: `has(object.spec) && has(object.spec.template) && has(object.spec.template.spec) && (${specUses('object.spec.template.spec', KEP_PATHS)})`,
  cronjobs: `has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && ` +
    `has(object.spec.jobTemplate.spec.template.spec) && (${specUses('object.spec.jobTemplate.spec.template.spec', KEP_PATHS)})`,
  podtemplates: `has(object.template) && has(object.template.spec) && (${specUses('object.template.spec', KEP_PATHS)})`,
} as const;

export type ClientConfig = { service: { name: string; namespace: string; path: string; port: number }; caBundle?: string } | { url: string; caBundle?: string };

/** The configuration object; `namespace` is the webhook's own, which it never sees. */
export function webhookConfiguration(clientConfig: ClientConfig, namespace = WEBHOOK_NAMESPACE): Record<string, unknown> {
  const common = {
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    reinvocationPolicy: 'IfNeeded',
    timeoutSeconds: TIMEOUT_SECONDS,
    clientConfig,
    namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [namespace] }] },
  };
  const hook = (name: string, rules: unknown[], expression: string) => ({
    name: `${name}.${CONFIG_NAME}`, ...common, rules, matchConditions: [{ name: 'uses-kep-4753-syntax', expression }],
  });
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: CONFIG_NAME, labels: { 'app.kubernetes.io/name': 'ownerrefs-webhook' } },
    webhooks: [
      hook('pods', [
        { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' },
        { apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods/ephemeralcontainers'], scope: 'Namespaced' },
      ], MATCH.pods),
      hook('templates', [
        { apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments', 'replicasets', 'statefulsets', 'daemonsets'], scope: 'Namespaced' },
        { apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['jobs'], scope: 'Namespaced' },
        { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['replicationcontrollers'], scope: 'Namespaced' },
      ], MATCH.templates),
      hook('cronjobs', [
        { apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['cronjobs'], scope: 'Namespaced' },
      ], MATCH.cronjobs),
      hook('podtemplates', [
        { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['podtemplates'], scope: 'Namespaced' },
      ], MATCH.podtemplates),
    ],
  };
}
