// Each of doctor's checks made to fail on purpose, through the DoctorEnv seam.

import type { Stats } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { agentArgsOfPid1, formatFindings, runChecks, type DoctorConfig, type DoctorEnv, type Finding } from '../../../agent/cli/doctor.ts';
import { ApiError } from '../../../agent/kube/client.ts';
import { KubeconfigError } from '../../../agent/kube/kubeconfig.ts';

const CFG: DoctorConfig = { nodeName: 'n1', kubeletRoot: '/var/lib/kubelet', csiSocket: '/var/lib/kubelet/plugins/ownerrefs.dev/csi.sock', registrationDir: '/var/lib/kubelet/plugins_registry', health: { host: '0.0.0.0', port: 8080 } };
const dir = { isDirectory: () => true, isSocket: () => false } as Stats;
const sock = { isDirectory: () => false, isSocket: () => true } as Stats;
const file = { isDirectory: () => false, isSocket: () => false } as Stats;
const MOUNT = (opts: string) => `2345 2300 259:1 /var/lib/kubelet/pods /var/lib/kubelet/pods rw,relatime ${opts} - ext4 /dev/root rw`;
const NEEDED = new Set(['list pods', 'watch pods', 'patch pods', 'get nodes', 'list nodes', 'watch nodes', 'create events']);

interface World {
  paths: Record<string, Stats>;
  mountinfo: string;
  allowed: Set<string>;
  api: Record<string, unknown | ApiError>;
  /** The node the credentials' token names (SelfSubjectReview), if any. */
  tokenNode: string | undefined;
  /** The running agent's /metrics; undefined: no agent answers. */
  metrics: string | undefined;
}

function healthy(): World {
  return {
    paths: { '/var/lib/kubelet/pods': dir, [CFG.csiSocket!]: sock, '/var/lib/kubelet/plugins_registry/ownerrefs.dev-reg.sock': sock },
    mountinfo: MOUNT('shared:1 master:1'),
    allowed: new Set(NEEDED),
    tokenNode: 'n1',
    metrics: 'ownerrefs_annotation_writes_total{result="ok"} 12\nownerrefs_annotation_writes_total{result="forbidden"} 0\n',
    api: {
      '/version': { gitVersion: 'v1.36.3' },
      '/apis/storage.k8s.io/v1/csinodes/n1': { spec: { drivers: [{ name: 'ownerrefs.dev', nodeID: 'n1' }] } },
      '/apis/storage.k8s.io/v1/csidrivers/ownerrefs.dev': { spec: { attachRequired: false, podInfoOnMount: true, fsGroupPolicy: 'None', volumeLifecycleModes: ['Ephemeral'] } },
      '/api/v1/nodes/n1': { metadata: { labels: { 'ownerrefs.dev/agent': 'true' } } },
    },
  };
}

function envOf(w: World): DoctorEnv {
  return {
    lstat: async (p) => w.paths[p],
    readdir: async (p) => (w.paths[p] ? ['a', 'b'] : undefined),
    mountinfo: async () => w.mountinfo,
    agentMetrics: async () => w.metrics,
    api: {
      async json<T>(method: string, p: string, body?: unknown): Promise<T> {
        if (method === 'POST' && p.endsWith('/selfsubjectreviews')) {
          return { status: { userInfo: { username: 'system:serviceaccount:ownerrefs-system:ownerrefs-agent', extra: w.tokenNode ? { 'authentication.kubernetes.io/node-name': [w.tokenNode] } : {} } } } as T;
        }
        if (method === 'POST') {
          const a = (body as { spec: { resourceAttributes: { verb: string; resource: string } } }).spec.resourceAttributes;
          return { status: { allowed: w.allowed.has(`${a.verb} ${a.resource}`) } } as T;
        }
        const v = w.api[p];
        if (v instanceof Error) throw v;
        if (v === undefined) throw new ApiError(404, 'NotFound', 'not found', undefined, p.split('/').pop());
        return v as T;
      },
    },
  };
}

const byCheck = (fs: Finding[]) => Object.fromEntries(fs.map((f) => [f.check, f]));

describe('doctor', () => {
  it('says OK to everything on a healthy node', async () => {
    const f = await runChecks(CFG, envOf(healthy()));
    expect(f.map((x) => `${x.verdict} ${x.check}`)).toEqual([
      'OK kubelet root', 'OK mount propagation', 'OK CSI socket', 'OK CSI registration socket', 'OK CSI driver registered with the kubelet',
      'OK CSIDriver object', 'OK API server', 'OK RBAC', 'OK token', 'OK Node', 'OK annotation writes']);
    expect(formatFindings(f)).toMatch(/^OK   kubelet root: \/var\/lib\/kubelet\/pods exists \(2 pod directories\)$/m);
  });

  const cases: { name: string; change: (w: World) => void; check: string; verdict: string; says: RegExp }[] = [
    { name: 'a kubelet root that is not this node\'s', change: (w) => delete w.paths['/var/lib/kubelet/pods'], check: 'kubelet root', verdict: 'FAIL', says: /microk8s: \/var\/snap\/microk8s\/common\/var\/lib\/kubelet.*kubeletRootDir/ },
    { name: 'a private mount of the pods directory', change: (w) => { w.mountinfo = MOUNT(''); }, check: 'mount propagation', verdict: 'FAIL', says: /mountPropagation: HostToContainer/ },
    { name: 'no pods directory: propagation cannot be judged', change: (w) => delete w.paths['/var/lib/kubelet/pods'], check: 'mount propagation', verdict: 'SKIP', says: /does not exist, so there is nothing to check/ },
    { name: 'client credentials that cannot be loaded', change: (w) => { w.api['/version'] = new KubeconfigError('cannot read client certificate /nonexistent.crt: ENOENT'); }, check: 'API server', verdict: 'FAIL', says: /^the credentials could not be loaded: cannot read client certificate \/nonexistent\.crt: ENOENT\. Fix the kubeconfig/ },
    { name: 'credentials the API server refuses', change: (w) => { w.api['/version'] = new ApiError(401, 'Unauthorized', 'API 401 Unauthorized: Unauthorized'); }, check: 'API server', verdict: 'FAIL', says: /^the API server refused the credentials .*wrong or expired/ },
    { name: 'the pods directory not a mount (on the host)', change: (w) => { w.mountinfo = ''; }, check: 'mount propagation', verdict: 'OK', says: /running on the host/ },
    { name: 'no CSI socket', change: (w) => delete w.paths[CFG.csiSocket!], check: 'CSI socket', verdict: 'FAIL', says: /missing: the agent is not serving/ },
    { name: 'a file where the CSI socket should be', change: (w) => { w.paths[CFG.csiSocket!] = file; }, check: 'CSI socket', verdict: 'FAIL', says: /not a socket/ },
    { name: 'no registration socket', change: (w) => delete w.paths['/var/lib/kubelet/plugins_registry/ownerrefs.dev-reg.sock'], check: 'CSI registration socket', verdict: 'FAIL', says: /plugins_registry/ },
    { name: 'the kubelet not having registered the driver', change: (w) => { w.api['/apis/storage.k8s.io/v1/csinodes/n1'] = { spec: { drivers: [] } }; }, check: 'CSI driver registered with the kubelet', verdict: 'FAIL', says: /plugin_watcher/ },
    { name: 'no CSIDriver object', change: (w) => delete w.api['/apis/storage.k8s.io/v1/csidrivers/ownerrefs.dev'], check: 'CSIDriver object', verdict: 'FAIL', says: /does not exist: apply it/ },
    { name: 'a CSIDriver that lets the kubelet chown', change: (w) => { w.api['/apis/storage.k8s.io/v1/csidrivers/ownerrefs.dev'] = { spec: { attachRequired: false, podInfoOnMount: true, fsGroupPolicy: 'File', volumeLifecycleModes: ['Ephemeral'] } }; }, check: 'CSIDriver object', verdict: 'FAIL', says: /fsGroupPolicy should be None/ },
    { name: 'no right to read CSINodes', change: (w) => { w.api['/apis/storage.k8s.io/v1/csinodes/n1'] = new ApiError(403, 'Forbidden', 'forbidden'); }, check: 'CSI driver registered with the kubelet', verdict: 'SKIP', says: /not allowed to look/ },
    { name: 'RBAC without watch pods', change: (w) => w.allowed.delete('watch pods'), check: 'RBAC', verdict: 'FAIL', says: /may not watch pods: re-apply/ },
    { name: 'RBAC wider than needed', change: (w) => w.allowed.add('get secrets'), check: 'RBAC', verdict: 'WARN', says: /may also get secrets/ },
    { name: 'credentials that name no node (a token not bound to the agent\'s pod)', change: (w) => { w.tokenNode = undefined; }, check: 'token', verdict: 'FAIL', says: /name no node, so the agent's policy refuses every annotation write/ },
    { name: 'credentials of another node\'s agent', change: (w) => { w.tokenNode = 'n2'; }, check: 'token', verdict: 'FAIL', says: /name node n2, not n1/ },
    { name: 'RBAC that may replace whole pods', change: (w) => w.allowed.add('update pods'), check: 'RBAC', verdict: 'WARN', says: /may also update pods/ },
    { name: 'a node name that is not a Node', change: (w) => delete w.api['/api/v1/nodes/n1'], check: 'Node', verdict: 'FAIL', says: /Node n1 does not exist: --node-name/ },
    { name: 'the agent\'s annotation writes refused (another webhook changes pods on UPDATE)', change: (w) => { w.metrics = 'ownerrefs_annotation_writes_total{result="ok"} 2\nownerrefs_annotation_writes_total{result="forbidden"} 7\n'; },
      check: 'annotation writes', verdict: 'WARN', says: /^7 of the agent's annotation writes were refused or not kept since it started: .*--field-selector reason=OwnerRefsAnnotationFailed.*exempt the agent's ServiceAccount/ },
    { name: 'the agent\'s annotation writes refused, and by whom (its policy, saying what the PATCH changed; another webhook)', change: (w) => { w.metrics = 'ownerrefs_annotation_writes_total{result="forbidden"} 9\n' +
      'ownerrefs_annotation_refusals_total{by="ValidatingAdmissionPolicy ownerrefs-agent.ownerrefs.dev",reason="the ownerrefs agent may not change a pod\'s labels"} 7\n' +
      'ownerrefs_annotation_refusals_total{by="webhook validate.kyverno.svc-fail",reason=""} 2\n'; },
      check: 'annotation writes', verdict: 'WARN', says: /^9 of the agent's annotation writes were refused or not kept since it started, by ValidatingAdmissionPolicy ownerrefs-agent\.ownerrefs\.dev \(7: the ownerrefs agent may not change a pod's labels\); webhook validate\.kyverno\.svc-fail \(2\): RBAC, an admission webhook/ },
    { name: 'the agent\'s writes refused other than 403 (a 400, a 422) or answered but not kept (a webhook stores another value)', change: (w) => { w.metrics = 'ownerrefs_annotation_writes_total{result="ok"} 2\n' +
      'ownerrefs_annotation_writes_total{result="refused"} 3\nownerrefs_annotation_writes_total{result="invalid"} 1\nownerrefs_annotation_writes_total{result="overridden"} 2\nownerrefs_annotation_writes_total{result="conflict"} 5\n' +
      'ownerrefs_annotation_refusals_total{by="mutating admission",reason=""} 2\nownerrefs_annotation_refusals_total{by="other",reason=""} 4\n'; },
      check: 'annotation writes', verdict: 'WARN', says: /^6 of the agent's annotation writes were refused or not kept since it started, by other \(4\); mutating admission \(2\):/ },
    { name: 'no agent answering beside doctor', change: (w) => { w.metrics = undefined; }, check: 'annotation writes', verdict: 'SKIP', says: /no agent answers on 127\.0\.0\.1:8080/ },
    { name: 'a node label that does not parse', change: (w) => { w.api['/api/v1/nodes/n1'] = { metadata: { labels: { 'ownerrefs.dev/env-file': 'maybe' } } }; }, check: 'Node', verdict: 'FAIL', says: /use "true" or "false"/ },
  ];

  it.each(cases)('$name', async ({ change, check, verdict, says }) => {
    const w = healthy();
    change(w);
    const f = byCheck(await runChecks(CFG, envOf(w)))[check]!;
    expect(f.verdict).toBe(verdict);
    expect(f.message).toMatch(says);
  });

  it('prints one line per finding, whatever a flag value holds', async () => {
    const w = healthy();
    const root = '/tmp/nl\nFAKE OK line\x1b[2J';
    const out = formatFindings(await runChecks({ ...CFG, kubeletRoot: root, csiSocket: undefined }, envOf(w)));
    expect(out.split('\n').filter(Boolean)).toHaveLength((await runChecks({ ...CFG, csiSocket: undefined }, envOf(w))).length);
    expect(out).toContain('/tmp/nl FAKE OK line\\u001b[2J/pods does not exist');
  });

  it('an unreachable API server fails once, and the checks that need it are not run', async () => {
    const w = healthy();
    w.api['/version'] = new Error('connect ECONNREFUSED 10.96.0.1:443');
    const f = await runChecks({ ...CFG, csiSocket: undefined }, envOf(w));
    expect(byCheck(f)['API server']).toMatchObject({ verdict: 'FAIL', message: expect.stringMatching(/ECONNREFUSED.*network path/) });
    expect(byCheck(f).RBAC).toBeUndefined();
  });

  it('reads the running agent\'s flags from PID 1 in its container, and nothing elsewhere', async () => {
    const cmd = ['node', '--max-semi-space-size=1', 'dist/agent/main.js', 'run', '--kubelet-root=/x', '--csi-socket=/x/s'].join('\0') + '\0';
    expect(await agentArgsOfPid1(async () => cmd)).toEqual(['--kubelet-root=/x', '--csi-socket=/x/s']);
    expect(await agentArgsOfPid1(async () => '/sbin/init\0')).toBeUndefined();
    expect(await agentArgsOfPid1(async () => { throw new Error('no /proc'); })).toBeUndefined();
  });
});
