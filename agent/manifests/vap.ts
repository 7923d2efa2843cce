// A ValidatingAdmissionPolicy and the binding that puts it in force (Deny), as one pair:
// the shape both of the product's policies share.

export interface PolicySpec {
  matchConstraints: Record<string, unknown>;
  matchConditions?: { name: string; expression: string }[];
  variables?: { name: string; expression: string }[];
  /** message, or messageExpression (CEL) to name what is refused. */
  validations: ({ expression: string; reason: string } & ({ message: string } | { messageExpression: string }))[];
}

/** The policy `name` (failurePolicy Fail) and its binding of the same name, optionally limited to `matchResources`. */
export function validatingPolicy(name: string, spec: PolicySpec, matchResources?: Record<string, unknown>): Record<string, unknown>[] {
  return [{
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: { failurePolicy: 'Fail', ...spec },
  }, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name },
    spec: { policyName: name, validationActions: ['Deny'], ...(matchResources ? { matchResources } : {}) },
  }];
}

/** A validation that refuses with `message` unless `expression` holds. */
export const refuse = (expression: string, message: string) => ({ expression, message, reason: 'Forbidden' });
