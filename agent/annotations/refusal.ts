// Who refused an API request, read from the API server's message: a value of few kinds, fit for
// a metric's label, so that `doctor` (which may read only the agent's /metrics) can say which
// policy or webhook refuses the agent's writes, and why when the refusal is the agent's own
// policy's (its messages are few: agent/manifests/agentpolicy.ts).

/** The refuser and, for the agent's own policy, its message; '' where none is known. */
export interface Refusal {
  /** `ValidatingAdmissionPolicy NAME`, `webhook NAME`, `RBAC`, or `other`. */
  by: string;
  /** The agent's own policy's message (`the ownerrefs agent may ...`); '' for any other refuser. */
  reason: string;
}

/** The API server's wording of each refuser (apiserver's admission plugins and its authorizer). */
export function refusalOf(message: string): Refusal {
  const policy = /ValidatingAdmissionPolicy '([^']+)'/.exec(message);
  if (policy) {
    // Only the agent's own policy's messages are a bounded set; another's may hold anything.
    const own = /denied request: (the ownerrefs agent may [^.\n]*)/.exec(message);
    return { by: `ValidatingAdmissionPolicy ${policy[1]}`, reason: own?.[1] ?? '' };
  }
  const webhook = /admission webhook "([^"]+)" denied the request/.exec(message);
  if (webhook) return { by: `webhook ${webhook[1]}`, reason: '' };
  if (/ cannot \w+ resource "/.test(message)) return { by: 'RBAC', reason: '' };
  return { by: 'other', reason: '' };
}
