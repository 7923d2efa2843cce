// The benchmark's cluster: the harness's real control plane, a node with room for
// 1,000+ pods, owner objects, and a FlowSchema that makes the API server count the
// agent's requests by itself (server-side, independent of the agent's own metric).

import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { KubeApiClient, ApiError } from '../../agent/kube/client.ts';
import { KubeCredentials } from '../../agent/kube/kubeconfig.ts';
import { startLocalControlPlane } from '../../localcluster/clusters.ts';
import { controlPlaneBinaries, reapLeftoverControlPlanes, type ControlPlane } from '../../localcluster/controlplane/controlplane.ts';
import { agentKubeconfig, apply } from '../../localcluster/agentproc.ts';

export const NS = 'bench';
/** FlowSchema that matches only the agent's ServiceAccount (daemonset.yaml). */
export const AGENT_FLOW_SCHEMA = 'ownerrefs-bench-agent';
export const MERGE = 'application/merge-patch+json';

export interface Owner { name: string; uid: string }

export interface BenchCluster {
  cp: ControlPlane;
  api: KubeApiClient;
  nodeName: string;
  agentKubeconfig: string;
  owners: [Owner, Owner];
  versions: { kubernetes: string; etcd: string };
  /** Requests the API server dispatched for the agent's ServiceAccount (APF counter). */
  agentRequests(): Promise<number>;
  /** The API server's /metrics, in Prometheus' text format. */
  apiServerMetrics(): Promise<string>;
  /** Lets the agent's ServiceAccount get this core resource (following owners of that kind). */
  allowFollowing(resource: string): Promise<void>;
  /** Sets (or, with null, removes) one label of the bench node. */
  setNodeLabel(key: string, value: string | null): Promise<void>;
  stop(): Promise<void>;
}

/**
 * `realNodes`: the control plane as for real kubelets (localcluster/controlplane), which routes
 * the API server's calls to a Service through its EndpointSlices (--enable-aggregator-routing)
 * and its loopback egress proxy: what puts several webhook replicas behind one Service here.
 */
export async function startBenchCluster(nodeName: string, workDir: string, opts: { realNodes?: boolean } = {}): Promise<BenchCluster> {
  const binDir = await controlPlaneBinaries(); // also read below: etcd's version
  await reapLeftoverControlPlanes();
  // The control plane registers the node (no kubelet: the benchmark lays out the volumes itself).
  const lcp = await startLocalControlPlane({ binDir, nodeName, ...opts.realNodes ? { realNodes: true } : {} });
  const { cp, kc } = lcp;
  try {
    const api = new KubeApiClient(KubeCredentials.fromFile(cp.kubeconfigPath) as unknown as KubeConfig);
    // Room for more than the registered node's 250 pods.
    const pods = { pods: '2000' };
    await api.json('PATCH', `/api/v1/nodes/${nodeName}/status`, { status: { capacity: pods, allocatable: pods } }, MERGE);
    await api.json('POST', '/api/v1/namespaces', { metadata: { name: NS } });
    const owners = await Promise.all(['owner-a', 'owner-b'].map(async (name) => {
      const cm = await api.json<{ metadata: { uid: string } }>('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name } });
      return { name, uid: cm.metadata.uid };
    })) as [Owner, Owner];
    const agentKc = await agentKubeconfig(kc, workDir, { nodeName });
    await createAgentFlowSchema(kc);
    const version = await api.json<{ gitVersion: string }>('GET', '/version');
    const etcdVersion = execFileSync(path.join(binDir, 'etcd'), ['--version']).toString().match(/etcd Version: (\S+)/)?.[1] ?? '?';
    return {
      cp, api, nodeName, agentKubeconfig: agentKc, owners,
      versions: { kubernetes: version.gitVersion, etcd: etcdVersion },
      async agentRequests() {
        const text = await rawGet(api, '/metrics');
        return text.split('\n')
          .filter((l) => l.startsWith('apiserver_flowcontrol_dispatched_requests_total{') && l.includes(`flow_schema="${AGENT_FLOW_SCHEMA}"`))
          .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
      },
      apiServerMetrics: () => rawGet(api, '/metrics'),
      async allowFollowing(resource) {
        const name = `ownerrefs-bench-follow-${resource}`;
        await apply(kc, [
          { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules: [{ apiGroups: [''], resources: [resource], verbs: ['get'] }] } as KubernetesObject,
          { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
            subjects: [{ kind: 'ServiceAccount', name: 'ownerrefs-agent', namespace: 'ownerrefs-system' }] } as KubernetesObject,
        ]);
      },
      async setNodeLabel(key, value) {
        await api.json('PATCH', `/api/v1/nodes/${nodeName}`, { metadata: { labels: { [key]: value } } }, MERGE);
      },
      async stop() {
        api.close();
        await lcp.stop();
      },
    };
  } catch (err) {
    await lcp.stop();
    throw err;
  }
}

/** GET of a non-JSON endpoint (metrics) through the same client. */
async function rawGet(api: KubeApiClient, p: string): Promise<string> {
  const ac = new AbortController();
  const res = await api.stream(p, ac.signal);
  let text = '';
  for await (const c of res) text += String(c);
  return text;
}

export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409;
}

/**
 * A FlowSchema matching only the agent's ServiceAccount (daemonset.yaml), so the API
 * server counts the agents' requests by itself (apiserver_flowcontrol_dispatched_requests_total).
 */
export async function createAgentFlowSchema(kc: KubeConfig): Promise<void> {
  const sa = { name: 'ownerrefs-agent', namespace: 'ownerrefs-system' };
  await apply(kc, [{
    apiVersion: 'flowcontrol.apiserver.k8s.io/v1', kind: 'FlowSchema',
    metadata: { name: AGENT_FLOW_SCHEMA },
    spec: {
      // Before the suggested service-accounts schema (9000); same priority level it uses.
      matchingPrecedence: 500,
      priorityLevelConfiguration: { name: 'workload-low' },
      distinguisherMethod: { type: 'ByUser' },
      rules: [{
        subjects: [{ kind: 'ServiceAccount', serviceAccount: sa }],
        resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true }],
        nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
      }],
    },
  } as KubernetesObject]);
}
