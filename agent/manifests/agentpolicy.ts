// The ValidatingAdmissionPolicy that bounds the agent's one write privilege, `patch pods`,
// the way NodeRestriction bounds a kubelet: the agent's ServiceAccount may change nothing of
// a pod but the ownerrefs.dev annotations it keeps (projections/annotations.ts), and only on
// pods bound to the node named in its own token. The API server puts that node in the
// token's user info (authentication.kubernetes.io/node-name) when the token is bound to a
// pod, as the DaemonSet pod's projected token is; a token bound to nothing carries no node,
// and is refused. Built here so that the chart's template and the tests agree on one object
// (scripts/gen-manifests.ts writes the template; a test compares them).

import { ANNOTATION_KEYS } from '../../projections/names.ts';
import { refuse, validatingPolicy } from './vap.ts';

export const AGENT_POLICY_NAME = 'ownerrefs-agent.ownerrefs.dev';
export const AGENT_SERVICE_ACCOUNT = 'ownerrefs-agent';
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

const list = (xs: readonly string[]) => `[${xs.map((x) => `'${x}'`).join(', ')}]`;
/** `field` of the object and of the old object, absent read as `empty`. */
const both = (field: string, empty: string): [string, string] => [`has(object.metadata.${field}) ? object.metadata.${field} : ${empty}`, `has(oldObject.metadata.${field}) ? oldObject.metadata.${field} : ${empty}`];

/** The policy and its binding, for the agent's ServiceAccount in `namespace`. */
export function agentPolicy(namespace: string): Record<string, unknown>[] {
  const [labels, oldLabels] = both('labels', '{}');
  const [annotations, oldAnnotations] = both('annotations', '{}');
  const [owners, oldOwners] = both('ownerReferences', '[]');
  const [finalizers, oldFinalizers] = both('finalizers', '[]');
  return validatingPolicy(AGENT_POLICY_NAME, {
    matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods'] }] },
    matchConditions: [{ name: 'the-ownerrefs-agent', expression: `request.userInfo.username == 'system:serviceaccount:${namespace}:${AGENT_SERVICE_ACCOUNT}'` }],
    variables: [
      { name: 'node', expression: `has(request.userInfo.extra) && '${NODE_NAME_EXTRA}' in request.userInfo.extra ? request.userInfo.extra['${NODE_NAME_EXTRA}'] : []` },
      { name: 'ours', expression: list(ANNOTATION_KEYS) },
      { name: 'annotations', expression: annotations },
      { name: 'oldAnnotations', expression: oldAnnotations },
    ],
    validations: [
      refuse(`variables.node.size() == 1 && has(oldObject.spec.nodeName) && oldObject.spec.nodeName == variables.node[0]`,
        'the ownerrefs agent may change only pods bound to the node named in its own service account token'),
      refuse(`variables.annotations.all(k, k in variables.ours || (k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.annotations[k])) && ` +
        `variables.oldAnnotations.all(k, k in variables.ours || k in variables.annotations)`,
        `the ownerrefs agent may change no annotation but ${ANNOTATION_KEYS.join(', ')}`),
      refuse(`(${labels}) == (${oldLabels})`, 'the ownerrefs agent may not change a pod\'s labels'),
      refuse(`(${owners}) == (${oldOwners})`, 'the ownerrefs agent may not change a pod\'s ownerReferences'),
      refuse(`(${finalizers}) == (${oldFinalizers})`, 'the ownerrefs agent may not change a pod\'s finalizers'),
      refuse('object.spec == oldObject.spec', 'the ownerrefs agent may not change a pod\'s spec'),
    ],
  });
}
