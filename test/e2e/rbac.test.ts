// Scenario 4: RBAC as shipped. Every e2e file runs the agent with a token of the
// ServiceAccount and ClusterRole taken from daemonset.yaml (support/agentproc.ts);
// this file checks the manifest itself and that the role is no wider than needed.
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { AuthorizationV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { apply, manifestObjects } from '../../localcluster/agentproc.ts';
import { useE2E } from '../support/e2e.ts';

describe('daemonset.yaml', () => {
  const e = useE2E('rbac');

  it('passes a server-side dry-run apply, object by object', async () => {
    const objs = manifestObjects();
    expect(objs.map((o) => o.kind).sort()).toEqual(['CSIDriver', 'ClusterRole', 'ClusterRoleBinding', 'DaemonSet', 'FlowSchema', 'Namespace', 'PriorityLevelConfiguration', 'ResourceQuota', 'ServiceAccount', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicyBinding']);
    const applied = await apply(e.kc, objs, true);
    expect(applied.map((o) => o.metadata?.name)).toEqual(objs.map((o) => o.metadata?.name));
  });

  it('grants the agent exactly what it needs', async () => {
    const authz = e.kc.makeApiClient(AuthorizationV1Api);
    const user = 'system:serviceaccount:ownerrefs-system:ownerrefs-agent';
    const can = async (verb: string, resource: string, namespace?: string) => (await authz.createSubjectAccessReview({
      body: { spec: { user, groups: ['system:serviceaccounts', 'system:authenticated'], resourceAttributes: { verb, resource, namespace } } },
    })).status!.allowed;
    // patch pods: bounded by the ValidatingAdmissionPolicy (test/security/policy.e2e.test.ts attacks it).
    for (const [verb, resource] of [['list', 'pods'], ['watch', 'pods'], ['patch', 'pods'], ['get', 'nodes'], ['watch', 'nodes'], ['create', 'events']] as const) {
      expect(await can(verb, resource, 'default'), `${verb} ${resource}`).toBe(true);
    }
    for (const [verb, resource] of [['get', 'secrets'], ['update', 'pods'], ['delete', 'pods'], ['create', 'configmaps'], ['update', 'nodes'], ['patch', 'events']] as const) {
      expect(await can(verb, resource, 'default'), `${verb} ${resource}`).toBe(false);
    }
  });

  it('doctor, with the agent\'s own credentials, finds everything in order; a wrong kubelet root fails with the fix', async () => {
    mkdirSync(path.join(e.kubeletRoot, 'pods'), { recursive: true });
    const doctor = (...args: string[]) => new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, [path.join(import.meta.dirname, '..', '..', 'agent', 'main.ts'), 'doctor', `--node-name=${e.nodeName}`,
        `--kubeconfig=${path.join(e.kubeletRoot, 'agent.kubeconfig')}`, ...args], (err, stdout) => resolve({ code: err ? Number((err as { code?: number }).code) : 0, out: stdout }));
    });
    // Beside the running agent (its health address), as in its pod: it reads the agent's counts.
    const good = await doctor(`--kubelet-root=${e.kubeletRoot}`, `--health-addr=127.0.0.1:${e.agent.healthPort}`);
    expect(good.out.split('\n').filter(Boolean).map((l) => l.split(':')[0])).toEqual(['OK   kubelet root', 'OK   mount propagation', 'OK   API server', 'OK   RBAC', 'OK   token', 'OK   Node',
      'OK   annotation writes']);
    expect(good.code).toBe(0);
    const bad = await doctor('--kubelet-root=/var/snap/nowhere/kubelet');
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/^FAIL kubelet root: \/var\/snap\/nowhere\/kubelet\/pods does not exist/m);
  });

  it('serves pods with those credentials', async () => {
    expect((await e.agent.get('/readyz')).status).toBe(200);
    expect(await e.agent.metric('ownerrefs_api_requests_total', 'code="403"')).toBe(0);
  });
});
