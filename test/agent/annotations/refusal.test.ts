import { describe, expect, it } from 'vitest';
import { refusalOf } from '../../../agent/annotations/refusal.ts';

describe('refusalOf: who refused, from the API server\'s message', () => {
  it.each([
    ['the agent\'s own policy, with its message',
      'API 403 Forbidden: pods "p" is forbidden: ValidatingAdmissionPolicy \'ownerrefs-agent.ownerrefs.dev\' with binding \'ownerrefs-agent.ownerrefs.dev\' denied request: the ownerrefs agent may not change a pod\'s labels',
      { by: 'ValidatingAdmissionPolicy ownerrefs-agent.ownerrefs.dev', reason: 'the ownerrefs agent may not change a pod\'s labels' }],
    ['another policy: named, its message not kept (it may hold anything)',
      'API 403 Forbidden: pods "p" is forbidden: ValidatingAdmissionPolicy \'require-team\' with binding \'require-team\' denied request: pod p-123 in ns lacks label team',
      { by: 'ValidatingAdmissionPolicy require-team', reason: '' }],
    ['a webhook', 'API 400 Bad Request: admission webhook "validate.kyverno.svc-fail" denied the request: policy x: rule y failed',
      { by: 'webhook validate.kyverno.svc-fail', reason: '' }],
    ['RBAC', 'API 403 Forbidden: pods "p" is forbidden: User "system:serviceaccount:ownerrefs-system:ownerrefs-agent" cannot patch resource "pods" in API group "" in the namespace "n"',
      { by: 'RBAC', reason: '' }],
    ['anything else', 'API 403 Forbidden: something new', { by: 'other', reason: '' }],
  ])('%s', (_name, message, want) => {
    expect(refusalOf(message)).toEqual(want);
  });
});
