// The MutatingWebhookConfiguration, built here so that the manifest in the repository,
// the tests and the code agree on one object (a test compares deploy/webhook.yaml with it).
//
// matchConditions make the API server call the webhook only for objects that use the
// KEP syntax (or, for Pods, a template's encoding of it): every other pod is admitted
// without waiting on the webhook, and without it when it is down. For the objects that
// match, failurePolicy is Fail: without the rewrite the API server refuses them anyway.

import { AGENT_FIELDS, OWNER_REFERENCES_FIELD } from '../../projections/downwardapi.ts';
import { TEMPLATE_ENV_FIELD } from './podspec.ts';

export const CONFIG_NAME = 'ownerrefs.dev';
export const WEBHOOK_NAMESPACE = 'ownerrefs-system';
export const TIMEOUT_SECONDS = 5;

const q = (s: string) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/** CEL: does the pod spec at `s` use the KEP syntax (or the template encoding, when `templateEnv`)? */
export function specUses(s: string, templateEnv: boolean): string {
  const fields = templateEnv ? `[${q(OWNER_REFERENCES_FIELD)}, ${q(TEMPLATE_ENV_FIELD)}]` : `[${q(OWNER_REFERENCES_FIELD)}]`;
  const env = (list: string) =>
    `(has(${s}.${list}) && ${s}.${list}.exists(c, has(c.env) && c.env.exists(e, has(e.valueFrom) && has(e.valueFrom.fieldRef) && e.valueFrom.fieldRef.fieldPath in ${fields})))`;
  const volumeFields = `[${AGENT_FIELDS.map(q).join(', ')}]`;
  const items = (src: string) => `has(${src}.items) && ${src}.items.exists(i, has(i.fieldRef) && i.fieldRef.fieldPath in ${volumeFields})`;
  const volumes = `(has(${s}.volumes) && ${s}.volumes.exists(v, (has(v.downwardAPI) && ${items('v.downwardAPI')}) || ` +
    `(has(v.projected) && has(v.projected.sources) && v.projected.sources.exists(p, has(p.downwardAPI) && ${items('p.downwardAPI')}))))`;
  return [env('containers'), env('initContainers'), env('ephemeralContainers'), volumes].join(' || ');
}

/** The expression for each webhook of the configuration. */
export const MATCH = {
  pods: `has(object.spec) && (${specUses('object.spec', true)})`,
  templates: `has(object.spec) && has(object.spec.template) && has(object.spec.template.spec) && (${specUses('object.spec.template.spec', false)})`,
  cronjobs: `has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && ` +
    `has(object.spec.jobTemplate.spec.template.spec) && (${specUses('object.spec.jobTemplate.spec.template.spec', false)})`,
  podtemplates: `has(object.template) && has(object.template.spec) && (${specUses('object.template.spec', false)})`,
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
