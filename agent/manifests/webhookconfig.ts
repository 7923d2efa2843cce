// The MutatingWebhookConfiguration, built here so that the manifest in the repository,
// the tests and the code agree on one object (a test compares webhook.yaml with it), from
// the workload-kind table (projections/workloadkinds.ts): one webhook per place a pod spec lives.
//
// matchConditions make the API server call the webhook only for objects that use the KEP
// syntax, for Pods whose spec reads one of our annotations (a workload's pods, once the
// webhook rewrote its template), and for Pods created carrying one (the webhook removes what
// their author wrote): every other pod is admitted without waiting on the webhook, and
// without it when it is down. For the objects that match, failurePolicy is Fail: without
// the rewrite the API server refuses the KEP syntax, and a pod admitted without its annotation
// would start with an empty value.

import { REWRITTEN_FIELDS } from '../../projections/annotations.ts';
import { ANNOTATION_KEYS, annotationField, WEBHOOK_CONFIG_NAME, WEBHOOK_NAMESPACE } from '../../projections/names.ts';
import { WEBHOOK_TIMEOUT_SECONDS } from '../common/defaults.ts';
import { rulesByGroup, WORKLOAD_KINDS, type WorkloadKind } from '../../projections/workloadkinds.ts';
import { celPath, celString, specUses } from './cel.ts';

/** Field paths only the rewrite makes valid; and those, plus the annotations they become, for Pods. */
const KEP_PATHS = Object.keys(REWRITTEN_FIELDS);
const POD_PATHS = [...KEP_PATHS, ...ANNOTATION_KEYS.map(annotationField)];

/** The webhooks of the configuration, in order, each with the kinds it serves. */
const HOOKS = [...new Set(WORKLOAD_KINDS.map((w) => w.webhook))].map((name) => ({ name, kinds: WORKLOAD_KINDS.filter((w) => w.webhook === name) }));

/** CEL: the object's pod spec (at `path`) exists, and reads one of `paths`. */
function matchExpression(path: readonly string[], paths: readonly string[]): string {
  const guards = path.map((_, i) => `has(${celPath('object', path.slice(0, i + 1))})`);
  return `${guards.join(' && ')} && (${specUses(celPath('object', path), paths)})`;
}

/** CEL: the object carries one of our annotations (on a Pod being created, only the webhook may have set it: it removes the author's). */
const CARRIES_OURS = `has(object.metadata.annotations) && [${ANNOTATION_KEYS.map(celString).join(', ')}].exists(k, k in object.metadata.annotations)`;

/**
 * The expression for each webhook of the configuration: a Pod's spec may also read our
 * annotations as written, and a Pod that carries one is sent too, whatever it reads.
 */
export const MATCH: Readonly<Record<WorkloadKind['webhook'], string>> = Object.fromEntries(HOOKS.map(({ name, kinds }) =>
  [name, name === 'pods' ? `(${matchExpression(kinds[0]!.podSpec, POD_PATHS)}) || (${CARRIES_OURS})` : matchExpression(kinds[0]!.podSpec, KEP_PATHS)])) as Record<WorkloadKind['webhook'], string>;

/**
 * A hook's rules. A Pod's annotations are set only when it is created (after that they are
 * the agent's), and its spec changes only through its ephemeral containers; every other kind
 * is rewritten at CREATE and UPDATE alike.
 */
function rules(kinds: readonly WorkloadKind[]): unknown[] {
  const scoped = (operations: string[], resources: (w: WorkloadKind) => readonly string[]) => rulesByGroup(kinds, resources)
    .map(({ apiGroups, apiVersions, resources: r }) => ({ apiGroups, apiVersions, operations, resources: r, scope: 'Namespaced' }));
  if (kinds.every((w) => w.kind === 'Pod')) {
    return [...scoped(['CREATE'], (w) => [w.resource]), ...scoped(['UPDATE'], (w) => w.specSubresources.map((s) => `${w.resource}/${s}`))];
  }
  return scoped(['CREATE', 'UPDATE'], (w) => [w.resource]);
}

export type ClientConfig = { service: { name: string; namespace: string; path: string; port: number }; caBundle?: string } | { url: string; caBundle?: string };

/** The configuration object; `namespace` is the webhook's own, which it never sees. */
export function webhookConfiguration(clientConfig: ClientConfig, namespace = WEBHOOK_NAMESPACE): Record<string, unknown> {
  const common = {
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    reinvocationPolicy: 'IfNeeded',
    timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
    clientConfig,
    namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [namespace] }] },
  };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: WEBHOOK_CONFIG_NAME, labels: { 'app.kubernetes.io/name': 'ownerrefs-webhook' } },
    webhooks: HOOKS.map(({ name, kinds }) => ({
      name: `${name}.${WEBHOOK_CONFIG_NAME}`, ...common, rules: rules(kinds), matchConditions: [{ name: 'uses-kep-4753-syntax', expression: MATCH[name] }],
    })),
  };
}
