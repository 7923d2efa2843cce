// The ValidatingAdmissionPolicy that makes the ownerrefs.dev/ annotations of a pod
// trustworthy to every reader (the kubelet, telemetry pipelines reading pod annotations,
// people): after creation, where the webhook sets or removes them, only the agent's
// ServiceAccount may change them. Any other writer of a pod (its author, a user with
// `patch pods`, server-side apply, a controller) is refused when its request changes, adds
// or removes one of them; every other change of a pod goes through as before.
//
// Break-glass: a cluster admin who must write one deletes this binding (an audited act),
// writes, and applies the manifest again. No user or group is exempt in the policy itself,
// so nothing but that act, or the agent, can write them.

import { ANNOTATION_KEYS } from '../../projections/names.ts';
import { AGENT_SERVICE_ACCOUNT } from './agentpolicy.ts';
import { gateUser } from './gate.ts';
import { celString } from './cel.ts';
import { validatingPolicy } from './vap.ts';

export const WRITERS_POLICY_NAME = 'annotation-writers.ownerrefs.dev';

/** The policy and its binding; the agent's ServiceAccount in `namespace` is the one writer it lets through. */
export function annotationWritersPolicy(namespace: string): Record<string, unknown>[] {
  const agent = `system:serviceaccount:${namespace}:${AGENT_SERVICE_ACCOUNT}`;
  const annotations = (o: string) => `has(${o}.metadata.annotations) ? ${o}.metadata.annotations : {}`;
  return validatingPolicy(WRITERS_POLICY_NAME, {
    matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods'] }] },
    // The agent, and the gate's lifter (admission.mode=policy): each bounded by a policy of its own.
    matchConditions: [{ name: 'not-an-ownerrefs-writer', expression: `!(request.userInfo.username in [${celString(agent)}, ${celString(gateUser(namespace))}])` }],
    variables: [
      { name: 'ours', expression: `[${ANNOTATION_KEYS.map(celString).join(', ')}]` },
      { name: 'annotations', expression: annotations('object') },
      { name: 'oldAnnotations', expression: annotations('oldObject') },
      { name: 'changed', expression: 'variables.ours.filter(k, (k in variables.annotations) != (k in variables.oldAnnotations) || ' +
        '(k in variables.annotations && variables.annotations[k] != variables.oldAnnotations[k]))' },
    ],
    validations: [{
      expression: 'variables.changed.size() == 0',
      messageExpression: `'the ownerrefs.dev/ annotations of a pod are written only by the ownerrefs.dev webhook, at creation, and by the ownerrefs agent (${agent}); this request changes ' + variables.changed.join(', ')`,
      reason: 'Forbidden',
    }],
  });
}
