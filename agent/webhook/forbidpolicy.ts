// KEP-4753's own mitigation ("Risks and Mitigations": some environments may not want pods to
// see their ownerReferences): a ValidatingAdmissionPolicy that refuses, in the namespaces
// carrying a label, every Pod and pod template that reads a pod's owners, in the KEP's syntax
// or through our annotations (validation runs after the webhook's rewrite, so both are
// checked). Off unless installed (the chart's forbidReading.enabled). Built here from the same
// CEL as the webhook's matchConditions, so that the two agree on what "reads" means.

import { ANNOTATION_KEYS, annotationField, REWRITTEN_FIELDS } from '../../projections/annotations.ts';
import { specUses } from './registration.ts';

export const FORBID_POLICY_NAME = 'forbid-reading-owners.ownerrefs.dev';
export const FORBID_LABEL = 'ownerrefs.dev/forbid-reading-owners';

const READS = [...Object.keys(REWRITTEN_FIELDS), ...ANNOTATION_KEYS.map(annotationField)];

/** Where each served kind keeps its pod spec, as CEL, with the has() guards that reach it. */
const SPECS: readonly [kinds: readonly string[], guard: string, spec: string][] = [
  [['Pod'], 'has(object.spec)', 'object.spec'],
  [['Deployment', 'ReplicaSet', 'StatefulSet', 'DaemonSet', 'Job', 'ReplicationController'],
    'has(object.spec) && has(object.spec.template) && has(object.spec.template.spec)', 'object.spec.template.spec'],
  [['CronJob'], 'has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && has(object.spec.jobTemplate.spec.template.spec)',
    'object.spec.jobTemplate.spec.template.spec'],
  [['PodTemplate'], 'has(object.template) && has(object.template.spec)', 'object.template.spec'],
];

/** The policy and its binding: namespaces labelled `label=true` refuse objects whose pods would read their owners. */
export function forbidReadingPolicy(label = FORBID_LABEL): Record<string, unknown>[] {
  const reads = SPECS.map(([kinds, guard, spec]) => `(request.kind.kind in [${kinds.map((k) => `'${k}'`).join(', ')}] && ${guard} && (${specUses(spec, READS)}))`).join(' || ');
  return [{
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: FORBID_POLICY_NAME },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['pods', 'pods/ephemeralcontainers', 'replicationcontrollers', 'podtemplates'] },
          { apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments', 'replicasets', 'statefulsets', 'daemonsets'] },
          { apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['jobs', 'cronjobs'] },
        ],
      },
      validations: [{
        expression: `!(${reads})`,
        message: 'this namespace forbids pods from reading their owners (KEP-4753, namespace label ' + label + '=true): remove every fieldRef to ' +
          'metadata.ownerReferences, ownerrefs.dev/... or metadata.annotations[\'ownerrefs.dev/...\']',
        reason: 'Forbidden',
      }],
    },
  }, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: FORBID_POLICY_NAME },
    spec: {
      policyName: FORBID_POLICY_NAME,
      validationActions: ['Deny'],
      matchResources: { namespaceSelector: { matchLabels: { [label]: 'true' } } },
    },
  }];
}
