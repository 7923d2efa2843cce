// The objects of the gate's lifter (admission/gate/), which admission.mode=policy installs
// beside its MutatingAdmissionPolicies: its ServiceAccount, RBAC, Deployment, and the
// ValidatingAdmissionPolicy that bounds its one write privilege, `patch pods`, to what lifting
// a gate is: on a pod not bound yet that carries SCHEDULING_GATE, write the ownerrefs.dev
// annotations, remove that gate and GATED_LABEL, and change nothing else.

import { ANNOTATION_KEYS, GATED_LABEL, SCHEDULING_GATE } from '../../projections/names.ts';
import { celString } from './cel.ts';
import { refuse, validatingPolicy } from './vap.ts';

export const GATE_NAME = 'ownerrefs-gate';
export const GATE_POLICY_NAME = 'ownerrefs-gate.ownerrefs.dev';
export const GATE_REPLICAS = 2;

const LABELS = { 'app.kubernetes.io/name': GATE_NAME };
const list = (xs: readonly string[]) => `[${xs.map(celString).join(', ')}]`;
const field = (o: string, f: string, empty: string) => `(has(${o}.metadata.${f}) ? ${o}.metadata.${f} : ${empty})`;
const gates = (o: string) => `(has(${o}.spec.schedulingGates) ? ${o}.spec.schedulingGates : [])`;

/** The username of the lifter's ServiceAccount in `namespace`. */
export const gateUser = (namespace: string) => `system:serviceaccount:${namespace}:${GATE_NAME}`;

/** The policy and its binding. */
export function gatePolicy(namespace: string): Record<string, unknown>[] {
  const G = celString(SCHEDULING_GATE);
  const L = celString(GATED_LABEL);
  const [labels, oldLabels] = [field('object', 'labels', '{}'), field('oldObject', 'labels', '{}')];
  return validatingPolicy(GATE_POLICY_NAME, {
    matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods'] }] },
    matchConditions: [{ name: 'the-ownerrefs-gate', expression: `request.userInfo.username == ${celString(gateUser(namespace))}` }],
    variables: [
      { name: 'ours', expression: list(ANNOTATION_KEYS) },
      { name: 'annotations', expression: field('object', 'annotations', '{}') },
      { name: 'oldAnnotations', expression: field('oldObject', 'annotations', '{}') },
    ],
    validations: [
      refuse(`(!has(request.subResource) || request.subResource == '') && (!has(oldObject.spec.nodeName) || oldObject.spec.nodeName == '') && ${gates('oldObject')}.exists(g, g.name == ${G})`,
        `the ownerrefs gate may change only pods not bound yet that carry the scheduling gate ${SCHEDULING_GATE}`),
      refuse(`${gates('object')} == ${gates('oldObject')}.filter(g, g.name != ${G})`, `the ownerrefs gate may remove the scheduling gate ${SCHEDULING_GATE} and no other`),
      refuse(`variables.annotations.all(k, k in variables.ours || (k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.annotations[k])) && ` +
        'variables.oldAnnotations.all(k, k in variables.annotations)', `the ownerrefs gate may add or change no annotation but ${ANNOTATION_KEYS.join(', ')}, and remove none`),
      refuse(`!(${L} in ${labels}) && ${labels}.all(k, k in ${oldLabels} && ${oldLabels}[k] == ${labels}[k]) && ${oldLabels}.all(k, k == ${L} || k in ${labels})`,
        `the ownerrefs gate may remove the label ${GATED_LABEL} and change no other`),
      refuse(`${field('object', 'ownerReferences', '[]')} == ${field('oldObject', 'ownerReferences', '[]')} && ${field('object', 'finalizers', '[]')} == ${field('oldObject', 'finalizers', '[]')}`,
        'the ownerrefs gate may not change a pod\'s ownerReferences or finalizers'),
      // What else of a gated pod's spec the API server lets an update change (images, deadlines, tolerations, scheduling directives): none of it.
      refuse(['containers', 'initContainers', 'activeDeadlineSeconds', 'tolerations', 'nodeSelector', 'affinity'].map((f) => `object.spec.?${f} == oldObject.spec.?${f}`).join(' && '),
        'the ownerrefs gate may not change a pod\'s spec but its scheduling gate'),
    ],
  });
}

/** The lifter's ServiceAccount, RBAC and Deployment in `namespace`, running `image`. */
export function gateObjects(namespace: string, image: string): Record<string, unknown>[] {
  const meta = (o: Record<string, unknown> = {}) => ({ name: GATE_NAME, ...o, labels: LABELS });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta({ namespace }) },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: meta(), rules: [
      // Watched by GATED_LABEL; patched only as gatePolicy allows.
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    ] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: meta(),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: GATE_NAME },
      subjects: [{ kind: 'ServiceAccount', name: GATE_NAME, namespace }] },
    { apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta({ namespace }), spec: {
      // Two, so that one replica's restart holds no pod; they need no election (lifter.ts).
      replicas: GATE_REPLICAS,
      selector: { matchLabels: LABELS },
      template: { metadata: { labels: LABELS }, spec: {
        serviceAccountName: GATE_NAME, priorityClassName: 'system-cluster-critical', enableServiceLinks: false,
        securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
        topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: LABELS } }],
        containers: [{
          name: 'gate', image, imagePullPolicy: 'IfNotPresent', args: ['gate', '--health-addr=:8081'],
          env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }, { name: 'LOG_LEVEL', value: 'info' }],
          ports: [{ name: 'http-health', containerPort: 8081, protocol: 'TCP' }],
          livenessProbe: { httpGet: { path: '/healthz', port: 'http-health' }, periodSeconds: 10, failureThreshold: 6 },
          readinessProbe: { httpGet: { path: '/readyz', port: 'http-health' }, periodSeconds: 5 },
          resources: { requests: { cpu: '10m', memory: '80Mi' }, limits: { memory: '256Mi' } },
          securityContext: { privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
        }],
      } },
    } },
  ];
}
