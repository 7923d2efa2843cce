// docs/reference/events.md: every Event reason the agent posts (the REASON_ constants of the
// modules that post them) and every failure reason an OwnerRefsProjectionFailed Event carries.

import { FAILURE_REASONS, NODE_SIDE_REASONS, type FailureReason } from '../../agent/common/errors.ts';
import { EVENT_IN_FLIGHT, EVENT_LIMIT, EVENT_QUEUE, SYNC_RETRY } from '../../agent/common/defaults.ts';
import * as kubeEvents from '../../agent/kube/events.ts';
import { AgentMetrics } from '../../agent/monitoring/metrics.ts';
import * as keeper from '../../agent/annotations/keeper.ts';
import * as lifter from '../../agent/admission/gate/lifter.ts';
import { code, describeAll, header, seconds, sentence, table } from './common.ts';

/** Every module that posts Events exports its reasons as REASON_*: a new one is found here. */
// Sorted: a module namespace's key order differs between Node and vitest's loader.
const REASONS = [kubeEvents, keeper, lifter].flatMap((m) => Object.entries(m).filter(([k]) => k.startsWith('REASON_')).map(([, v]) => String(v))).sort();

const WRITE_FAILED: FailureReason = 'WriteFailed';

interface EventDoc {
  on: 'Pod' | 'Node';
  when: string;
}

const EVENTS: Record<string, EventDoc> = {
  [kubeEvents.REASON_PROJECTION_FAILED]: {
    on: 'Pod',
    when: 'The agent could not keep the pod\'s files: the annotation is invalid, names a volume the pod lacks or one that is not an emptyDir, the files would exceed `--max-bytes`, or a write failed. The message starts with a [failure reason](#failure-reasons) and says what to fix. Write failures are retried with backoff ' +
      `(${seconds(SYNC_RETRY.initialMs)} to ${seconds(SYNC_RETRY.maxMs)}); other pods are unaffected. In CSI mode a failed publish gives one too (the kubelet retries the publish and adds its own \`FailedMount\` Event).`,
  },
  [keeper.REASON_ANNOTATION_FAILED]: {
    on: 'Pod',
    when: 'The API server refused the agent\'s PATCH of the pod\'s `ownerrefs.dev/` annotations (403 or 422: RBAC, the agent\'s ValidatingAdmissionPolicy, or a token that names another node or none). Retried with backoff; `ownerrefs-agent doctor` checks the token.',
  },
  [lifter.REASON_GATE_WAITING]: {
    on: 'Pod',
    when: '`admission.mode=policy`: the pod reads its workload\'s values, and the gate\'s lifter has not read its owners yet (`Pending`), or its reads fail (`Unavailable`). The pod stays `SchedulingGated`, no container started, and is retried with backoff; said once per pod.',
  },
  [lifter.REASON_GATE_UNRESOLVED]: {
    on: 'Pod',
    when: '`admission.mode=policy`: the lifter may not or cannot read an owner of the pod\'s chain (`Forbidden`: apply `rbac-follow-owners.yaml`; `NotServed`; `KindNotFollowed`: `--follow-kinds`). It wrote the values as `(unresolved: REASON)`, as the webhook does, and lifted the gate.',
  },
  [lifter.REASON_GATE_FAILED]: {
    on: 'Pod',
    when: '`admission.mode=policy`: the lifter\'s PATCH, which writes the values and lifts the gate, failed other than by a conflict (403: its RBAC or its ValidatingAdmissionPolicy `ownerrefs-gate.ownerrefs.dev`). The pod stays gated; retried with backoff.',
  },
  [kubeEvents.REASON_INVALID_NODE_LABEL]: {
    on: 'Node',
    when: 'An `ownerrefs.dev/` [node label](node-labels.md) has a value other than `true` or `false` (the last good setting stays), or is one of them but for case or dashes (the Event names the label meant; the misspelt one is ignored). Each bad label is said once while it stays.',
  },
  [kubeEvents.REASON_FOLLOW_FORBIDDEN]: {
    on: 'Node',
    when: 'The agent may not read an owner\'s kind (for the files of a node that follows owners, or for the workload annotations a pod reads): apply `rbac-follow-owners.yaml` (for a kind given with `--follow-kinds`, add `get` on it there). A chain that reaches that kind ends `Forbidden` where no value was known; a value in place is kept.',
  },
};

export function eventsPage(): string {
  // The pod's Events first: most readers are pod authors.
  const rows = describeAll('Event reasons', REASONS, EVENTS).sort(([, a], [, b]) => Number(a.on === 'Node') - Number(b.on === 'Node'))
    .map(([reason, d]) => [code(reason), 'Warning', d.on, d.when]);
  const reasons = Object.entries(FAILURE_REASONS) as [FailureReason, string][];
  const whose = (r: FailureReason) => NODE_SIDE_REASONS.includes(r) ? 'the node' : 'the pod\'s author';
  const metrics = new AgentMetrics({ processMetrics: false });
  const name = (m: unknown) => (m as { name: string }).name;
  return `${header(['agent/kube/events.ts', 'agent/annotations/keeper.ts', 'agent/admission/gate/lifter.ts', 'agent/common/errors.ts'])}
# Events

The agent reports what someone must fix as Warning Events on the object at fault: the pod
(its author's to fix) or the agent's own Node (the operator's), with \`reportingComponent\`
\`ownerrefs.dev/agent\` and the node's name as \`reportingInstance\`. Events on a Node are in
the \`default\` namespace, as the kubelet's are. The gate's lifter (\`admission.mode=policy\`) posts
its own on the pods it holds, with its pod's name as \`reportingInstance\`. The webhook posts
none: its denials and warnings are in the API server's answer to whoever applied the object.

${table(['Reason', 'Type', 'On', 'When'], rows)}

Events are rate-limited per object and reason: ${EVENT_LIMIT.burst}, then one per
${seconds(EVENT_LIMIT.refillMs)}. Every object gets its first Event however many fail at once:
${EVENT_IN_FLIGHT} are posted at a time and the rest wait their turn; only past
${EVENT_QUEUE.toLocaleString('en-US')} waiting, a flood, is one dropped and counted in
${code(name(metrics.eventsDropped))}.

## Failure reasons

The message of an ${code(kubeEvents.REASON_PROJECTION_FAILED)} Event starts with one of these, and
${code(name(metrics.failures))} counts failures by them (\`reason\` label).
\`ownerrefs-agent render\` prints the Events a Pod manifest would get, in the same words. The
pod author's reasons raise the alert \`OwnerRefsPodsMisconfigured\`, ${code(WRITE_FAILED)} the alert
\`OwnerRefsWriteFailures\` ([runbooks](../RUNBOOKS.md)).

${table(['Reason', 'Whose to fix', 'Meaning'], reasons.map(([r, meaning]) => [code(r), whose(r), sentence(meaning)]))}
`;
}
