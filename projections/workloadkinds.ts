// The kinds that carry a pod spec, and where: the one table from which the webhook's rules
// and match conditions (agent/manifests/webhookconfig.ts), the forbid policy's rules
// (agent/manifests/forbidpolicy.ts), the kinds the webhook serves (agent/admission/webhook/review.ts, objects.ts)
// and the owner reader's built-in allow-list (agent/owners/ownermeta.ts) are all derived.

export interface WorkloadKind {
  kind: string;
  /** API group ('' for the core group) and version. */
  group: string;
  version: string;
  /** The resource's plural name, as in the URL and in admission rules. */
  resource: string;
  /** Path from the object's root to its pod spec. */
  podSpec: readonly string[];
  /** Subresources through which the pod spec itself changes (a Pod's ephemeral containers). */
  specSubresources: readonly string[];
  /**
   * The webhook of our MutatingWebhookConfiguration that serves the kind (one per pod-spec
   * path: each has its own match condition, and a Pod's also reads our annotations).
   */
  webhook: 'pods' | 'templates' | 'cronjobs' | 'podtemplates';
  /** A controller that owns pods or other controllers: one the owner reader follows by default. */
  owner: boolean;
}

const TEMPLATE = ['spec', 'template', 'spec'] as const;
const apps = (kind: string, resource: string): WorkloadKind =>
  ({ kind, group: 'apps', version: 'v1', resource, podSpec: TEMPLATE, specSubresources: [], webhook: 'templates', owner: true });

export const WORKLOAD_KINDS: readonly WorkloadKind[] = [
  { kind: 'Pod', group: '', version: 'v1', resource: 'pods', podSpec: ['spec'], specSubresources: ['ephemeralcontainers'], webhook: 'pods', owner: false },
  apps('Deployment', 'deployments'),
  apps('ReplicaSet', 'replicasets'),
  apps('StatefulSet', 'statefulsets'),
  apps('DaemonSet', 'daemonsets'),
  { kind: 'Job', group: 'batch', version: 'v1', resource: 'jobs', podSpec: TEMPLATE, specSubresources: [], webhook: 'templates', owner: true },
  { kind: 'CronJob', group: 'batch', version: 'v1', resource: 'cronjobs', podSpec: ['spec', 'jobTemplate', 'spec', 'template', 'spec'], specSubresources: [], webhook: 'cronjobs', owner: true },
  { kind: 'ReplicationController', group: '', version: 'v1', resource: 'replicationcontrollers', podSpec: TEMPLATE, specSubresources: [], webhook: 'templates', owner: true },
  { kind: 'PodTemplate', group: '', version: 'v1', resource: 'podtemplates', podSpec: ['template', 'spec'], specSubresources: [], webhook: 'podtemplates', owner: false },
];

/** The row for a request's kind, or undefined (a group like "constructor" matches nothing). */
export function workloadKind(group: string, kind: string): WorkloadKind | undefined {
  return WORKLOAD_KINDS.find((w) => w.group === group && w.kind === kind);
}

/** The row for a kind name alone (offline input names no group; every kind here is unique by name). */
export function workloadKindNamed(kind: string): WorkloadKind | undefined {
  return WORKLOAD_KINDS.find((w) => w.kind === kind);
}

/** Admission rules for `rows`, one per API group in first-seen order, each listing its resources. */
export function rulesByGroup(rows: readonly WorkloadKind[], resources: (w: WorkloadKind) => readonly string[]): { apiGroups: string[]; apiVersions: string[]; resources: string[] }[] {
  const groups = new Map<string, { apiGroups: string[]; apiVersions: string[]; resources: string[] }>();
  for (const w of rows) {
    const g = groups.get(w.group) ?? { apiGroups: [w.group], apiVersions: [w.version], resources: [] };
    g.resources.push(...resources(w));
    groups.set(w.group, g);
  }
  return [...groups.values()];
}
