// The ValidatingAdmissionPolicy that makes the ownerrefs.dev/ annotations of a pod
// trustworthy to every reader (the kubelet, telemetry pipelines reading pod annotations,
// people): after creation, where the webhook sets or removes them, only the agent's
// ServiceAccount may change them. Any other writer of a pod (its author, a user with
// `patch pods`, server-side apply, a controller) is refused when its request changes, adds
// or removes one of them; every other change of a pod goes through as before.
//
// Every way the API server has to write a pod's annotations is matched, not only `pods`:
//   - an UPDATE (or PATCH) of any pod subresource: the status strategy keeps the request's
//     metadata, so a merge patch of pods/<name>/status would store annotations (the kubelet
//     sends the pod's as they are, and is refused only if it changes ours);
//   - a Binding (pods/<name>/binding, or the older bindings resource): the API server copies
//     its annotations onto the pod as it binds it, and no pod admission sees that. No scheduler
//     sets ours, so a Binding may carry none;
//   - a Pod's CREATE, in every namespace and with or without the webhook: our mutating
//     admission (the webhook, or the MutatingAdmissionPolicies) runs first and removes every
//     one of ours the pod's spec does not read, and the Node's, which only the agent on the
//     pod's node can know. One still there was planted where no admission of ours ran (a
//     namespace the webhook leaves out, an install without it), and the pod is refused, naming
//     it. A value the spec reads is let through: where no admission of ours ran, the agent
//     writes the truth over it once the pod is on its node (SECURITY.md says for how long).
//
// Break-glass: a cluster admin who must write one deletes this binding (an audited act),
// writes, and applies the manifest again. No user or group is exempt in the policy itself,
// so nothing but that act, or the agent, can write them.

import { ANNOTATION_KEYS, ANNOTATIONS, annotationField } from '../../projections/names.ts';
import { AGENT_SERVICE_ACCOUNT } from './agentpolicy.ts';
import { gateUser } from './gate.ts';
import { celString, specUses } from './cel.ts';
import { validatingPolicy } from './vap.ts';

export const WRITERS_POLICY_NAME = 'annotation-writers.ownerrefs.dev';

/** The policy and its binding; the agent's ServiceAccount in `namespace` is the one writer it lets through. */
export function annotationWritersPolicy(namespace: string): Record<string, unknown>[] {
  const agent = `system:serviceaccount:${namespace}:${AGENT_SERVICE_ACCOUNT}`;
  const annotations = (o: string) => `has(${o}.metadata.annotations) ? ${o}.metadata.annotations : {}`;
  return validatingPolicy(WRITERS_POLICY_NAME, {
    matchConstraints: { resourceRules: [
      { apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods', 'pods/*'] },
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods', 'pods/binding', 'bindings'] },
    ] },
    // The agent, and the gate's lifter (admission.mode=policy), each bounded by a policy of its
    // own, pass every validation. Not a matchCondition: nearly every write is by someone else,
    // so the condition would hold and the validations run after it anyway: every pod write
    // would pay the API server's evaluation of a condition on top of theirs.
    variables: [
      { name: 'ownerrefsWriter', expression: `request.userInfo.username in [${celString(agent)}, ${celString(gateUser(namespace))}]` },
      // A Pod being created: our mutating admission ran before this, so its values are ours.
      { name: 'creatingPod', expression: "request.operation == 'CREATE' && request.kind.kind == 'Pod'" },
      { name: 'ours', expression: `[${ANNOTATION_KEYS.map(celString).join(', ')}]` },
      { name: 'annotations', expression: annotations('object') },
      // A Binding is created: every one of ours it carries would be a change of the pod's.
      { name: 'oldAnnotations', expression: `request.operation == 'CREATE' ? {} : (${annotations('oldObject')})` },
      { name: 'changed', expression: 'variables.ours.filter(k, (k in variables.annotations) != (k in variables.oldAnnotations) || ' +
        '(k in variables.annotations && variables.annotations[k] != variables.oldAnnotations[k]))' },
    ],
    validations: [{
      expression: 'variables.ownerrefsWriter || variables.creatingPod || variables.changed.size() == 0',
      messageExpression: `'the ownerrefs.dev/ annotations of a pod are written only by the ownerrefs.dev webhook, at creation, and by the ownerrefs agent (${agent}); this request changes ' + variables.changed.join(', ')`,
      reason: 'Forbidden',
    }, ...ANNOTATION_KEYS.map((key) => key === ANNOTATIONS.node ? {
      expression: `variables.ownerrefsWriter || !variables.creatingPod || !(${celString(key)} in variables.annotations)`,
      message: `a pod is created without the annotation ${key}: the ownerrefs agent on the pod's node (${agent}) writes it once the pod is bound there; remove it`,
      reason: 'Forbidden',
    } : {
      // Evaluated only for a pod that carries the key: the walk of its spec costs nothing to the others.
      expression: `variables.ownerrefsWriter || !variables.creatingPod || !(${celString(key)} in variables.annotations) || (${specUses('object.spec', [annotationField(key)])})`,
      message: `a pod is created carrying the annotation ${key} without reading it: only the ownerrefs.dev webhook or admission policy, at creation, and the ownerrefs agent (${agent}) write it, and no admission of ours ran for this pod to remove it; remove it`,
      reason: 'Forbidden',
    })],
  });
}
