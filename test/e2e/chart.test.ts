// Every rendering of the Helm chart's value matrix is accepted by the real API server
// (server-side dry-run apply, object by object). The plain manifests are renderings too
// (test/packaging/chart.test.ts), and every e2e file runs the agent with daemonset.yaml's
// RBAC: the RBAC the tests exercise is the RBAC users get. The real helm installs against
// the real API server where the chart looks at the cluster (its namespace).
//
// On an API server of this file's own: the shared one holds what other files leave there
// (daemonset.yaml's ClusterRole, the test webhook's registration by URL), which a server-side
// apply would merge with and `helm install` would refuse to adopt.

import { spawnSync } from 'node:child_process';
import { ApiextensionsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apply } from '../../localcluster/agentproc.ts';
import { startLocalControlPlane, type LocalControlPlane } from '../../localcluster/clusters.ts';
import { CHART, helmBin } from '../../scripts/gen-manifests.ts';
import { clusterInfo } from '../support/cluster.ts';
import { renderMatrix } from '../support/chart.ts';

/** cert-manager's two kinds the chart makes, as stand-ins (their schema open): enough for the API server to take them. */
async function certManagerKinds(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const [kind, plural] of [['Certificate', 'certificates'], ['Issuer', 'issuers']] as const) {
    await api.createCustomResourceDefinition({ body: { metadata: { name: `${plural}.cert-manager.io` }, spec: {
      group: 'cert-manager.io', scope: 'Namespaced', names: { kind, plural, singular: kind.toLowerCase() },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } } }],
    } } }).catch((err: unknown) => { if (!String(err).includes('409')) throw err; });
  }
}

describe('the Helm chart against the API server', () => {
  let renderings: ReturnType<typeof renderMatrix>;
  let lcp: LocalControlPlane | undefined;
  let kc: KubeConfig;
  beforeAll(async () => {
    renderings = renderMatrix(helmBin());
    lcp = await startLocalControlPlane({ binDir: clusterInfo().binDir });
    kc = lcp.kc;
    await certManagerKinds(kc);
  }, 600_000);
  afterAll(async () => {
    await lcp?.stop();
  });

  it('every rendering of the value matrix passes a server-side dry-run apply', async () => {
    // Namespaced objects need their namespace to exist, even in a dry run: made for real once
    // (the defaults' Namespace), so the file passes alone and not only after a test that made it.
    await apply(kc, renderings[0]![1].filter((o) => o.kind === 'Namespace'));
    for (const [name, objs] of renderings) {
      // The Namespace itself is dry-run like the rest.
      const applied = await apply(kc, objs, true).catch((err: unknown) => { throw new Error(`${name}: ${String(err)}`); });
      expect({ name, count: applied.length }).toEqual({ name, count: objs.length });
    }
  });

  it('installs into the release\'s namespace with `helm install -n NS --create-namespace`, leaving the namespace helm made as it is; refuses one whose Pod Security level would refuse the agent, saying so', async () => {
    const helm = (...args: string[]) => spawnSync(helmBin(), [...args, `--kubeconfig=${lcp!.cp.kubeconfigPath}`], { encoding: 'utf8' });
    const ns = `helm-made-${Date.now().toString(36)}`;
    const r = helm('install', 'ownerrefs-agent', CHART, '--namespace', ns, '--create-namespace');
    expect(r.status, r.stderr).toBe(0);
    const manifest = helm('get', 'manifest', 'ownerrefs-agent', '--namespace', ns).stdout;
    expect([...manifest.matchAll(/^  namespace: (.+)$/gm)].map((m) => m[1]).filter((n) => n !== ns)).toEqual([]);
    expect(manifest).toContain(`system:serviceaccount:${ns}:ownerrefs-agent`);
    const core = kc.makeApiClient(CoreV1Api);
    expect((await core.listNamespacedServiceAccount({ namespace: ns })).items.map((a) => a.metadata!.name)).toContain('ownerrefs-agent');
    expect(helm('uninstall', 'ownerrefs-agent', '--namespace', ns).status).toBe(0);

    const strict = `${ns}-baseline`;
    await core.createNamespace({ body: { metadata: { name: strict, labels: { 'pod-security.kubernetes.io/enforce': 'baseline' } } } });
    const refused = helm('install', 'ownerrefs-agent', CHART, '--namespace', strict, '--dry-run=server');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain(`namespace ${strict} enforces the Pod Security level baseline, which refuses the agent's pods (hostPath, uid 0): label it pod-security.kubernetes.io/enforce=privileged`);
  });
});
