// `ownerrefs-agent doctor`: the checks an operator would run by hand when files do not
// appear, each answered in plain words with the exact fix. Run it in the agent's pod
// (`kubectl exec ds/ownerrefs-agent -- ownerrefs-agent doctor`) or on a node with the
// same flags as `run` (and a kubeconfig). Exit 0 when nothing failed, 1 otherwise.
//
// Every check takes its inputs through the DoctorEnv seam, so each failure is tested on purpose.

import type { Stats } from 'node:fs';
import path from 'node:path';
import { NODE_NAME_EXTRA } from '../manifests/agentpolicy.ts';
import { settingsFromLabels } from '../node/nodeconfig.ts';
import type { ApiClient } from '../kube/client.ts';
import { ApiError } from '../kube/client.ts';
import { KubeconfigError } from '../kube/kubeconfig.ts';
import { oneLine } from '../common/validation.ts';
import { localUrlHost } from '../common/flags.ts';
import { DRIVER_NAME } from '../../projections/names.ts';

export type Verdict = 'OK' | 'FAIL' | 'WARN' | 'SKIP';
export interface Finding {
  verdict: Verdict;
  check: string;
  /** What was found; for FAIL and WARN, also what to do. */
  message: string;
}

export interface DoctorConfig {
  nodeName: string;
  kubeletRoot: string;
  csiSocket: string | undefined;
  registrationDir: string | undefined;
  /** The running agent's health server (run's --health-addr), whose /metrics counts its writes. */
  health?: { host: string; port: number };
}

/** What the checks read; the real one is the process's file system, /proc and the API server. */
export interface DoctorEnv {
  lstat(p: string): Promise<Stats | undefined>;
  readdir(p: string): Promise<string[] | undefined>;
  mountinfo(): Promise<string>;
  api: Pick<ApiClient, 'json'>;
  /** The running agent's /metrics, or undefined when no agent answers there. */
  agentMetrics(health: { host: string; port: number }): Promise<string | undefined>;
}

/** What the agent needs, and a few things it must not have (RBAC). */
const NEEDED: readonly [verb: string, resource: string][] = [['list', 'pods'], ['watch', 'pods'], ['patch', 'pods'], ['get', 'nodes'], ['list', 'nodes'], ['watch', 'nodes'], ['create', 'events']];
const FORBIDDEN: readonly [verb: string, resource: string][] = [['get', 'secrets'], ['update', 'pods'], ['delete', 'pods'], ['update', 'nodes'], ['create', 'pods']];

export async function runChecks(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding[]> {
  const out: Finding[] = [];
  out.push(await kubeletRoot(cfg, env));
  out.push(await propagation(cfg, env));
  if (cfg.csiSocket) out.push(...await csi(cfg, env));
  out.push(...await rbac(cfg, env));
  out.push(await node(cfg, env));
  out.push(await annotationWrites(cfg, env));
  return out;
}

/** The results of ownerrefs_annotation_writes_total that leave a pod's value stale (each posted an Event). */
const NOT_KEPT = ['forbidden', 'invalid', 'refused', 'overridden'] as const;

/**
 * The agent's PATCHes of pod annotations refused, or answered but not kept, since it started. Another admission webhook
 * that changes every pod on UPDATE (a policy engine stamping an annotation or a label) makes
 * the agent's own policy refuse each of them: the files of pods in KEP-4753 syntax then never
 * follow ownership changes, and nothing else in doctor would say so.
 */
async function annotationWrites(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding> {
  const check = 'annotation writes';
  if (!cfg.health) return { verdict: 'SKIP', check, message: 'no health address to read the running agent\'s counts from' };
  const at = `${localUrlHost(cfg.health.host)}:${cfg.health.port}`;
  const text = await env.agentMetrics(cfg.health);
  if (text === undefined) return { verdict: 'SKIP', check, message: `no agent answers on ${at} (doctor reads the counts of the agent running beside it)` };
  const count = (result: string) => text.split('\n').filter((l) => l.startsWith('ownerrefs_annotation_writes_total{') && l.includes(`result="${result}"`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const refused = NOT_KEPT.reduce((n, r) => n + count(r), 0);
  if (refused > 0) {
    return { verdict: 'WARN', check, message: `${refused} of the agent's annotation writes were refused or not kept since it started${refusers(text)}: RBAC, an admission webhook or policy refuses or changes its PATCH of pods, or a pod's annotations leave no room. ` +
      '`kubectl get events -A --field-selector reason=OwnerRefsAnnotationFailed` shows the refusal\'s message, and `kubectl ownerrefs status` the webhooks that see pod updates; ' +
      'exempt the agent\'s ServiceAccount in the webhook that changes pods on UPDATE (docs/RUNBOOKS.md, OwnerRefsAnnotationWritesRefused)' };
  }
  return ok(check, `none refused (${count('ok')} written since the agent started)`);
}

/**
 * Who refused them, from ownerrefs_annotation_refusals_total{by,reason}: ", by REFUSER (N: REASON); ...",
 * most first. The agent's own policy says what the PATCH changed that it may not: usually
 * another mutating webhook's change to the same request.
 */
function refusers(metrics: string): string {
  const found: { by: string; reason: string; n: number }[] = [];
  for (const line of metrics.split('\n')) {
    const m = /^ownerrefs_annotation_refusals_total\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const label = (name: string) => new RegExp(`(?:^|,)${name}="((?:[^"\\\\]|\\\\.)*)"`).exec(m[1]!)?.[1]?.replace(/\\(.)/g, '$1') ?? '';
    found.push({ by: label('by'), reason: label('reason'), n: Number(m[2]) });
  }
  if (found.length === 0) return '';
  return ', by ' + found.sort((a, b) => b.n - a.n).map((f) => `${f.by} (${f.n}${f.reason ? `: ${f.reason}` : ''})`).join('; ');
}

const ok = (check: string, message: string): Finding => ({ verdict: 'OK', check, message });
const fail = (check: string, message: string): Finding => ({ verdict: 'FAIL', check, message });

async function kubeletRoot(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding> {
  const pods = path.join(cfg.kubeletRoot, 'pods');
  const st = await env.lstat(pods);
  if (!st?.isDirectory()) {
    return fail('kubelet root', `${pods} does not exist: --kubelet-root (${cfg.kubeletRoot}) is not this node's kubelet root. ` +
      'Find it with `ps -o args= -C kubelet` (--root-dir) or in the kubelet config; k3s and RKE2: /var/lib/kubelet, microk8s: /var/snap/microk8s/common/var/lib/kubelet, ' +
      'k0s: /var/lib/k0s/kubelet. Then install with the chart\'s kubeletRootDir set to it (it moves every path), or edit daemonset.yaml\'s hostPaths, mounts and flags.');
  }
  const entries = await env.readdir(pods) ?? [];
  return ok('kubelet root', `${pods} exists (${entries.length} pod directories)`);
}

/** The mountinfo line of the mount point at `p`, if `p` is one. */
function mountOf(mountinfo: string, p: string): string[] | undefined {
  const lines = mountinfo.split('\n').map((l) => l.split(' '));
  return lines.filter((f) => f[4] === p).at(-1);
}

async function propagation(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding> {
  const pods = path.join(cfg.kubeletRoot, 'pods');
  if (!(await env.lstat(pods))?.isDirectory()) return { verdict: 'SKIP', check: 'mount propagation', message: `${pods} does not exist, so there is nothing to check (see the kubelet root check)` };
  const m = mountOf(await env.mountinfo(), pods);
  if (!m) return ok('mount propagation', `${pods} is not a mount of its own (running on the host): the kubelet's later mounts are visible`);
  const optional = m.slice(6, m.indexOf('-'));
  if (optional.some((o) => o.startsWith('master:') || o.startsWith('shared:'))) {
    return ok('mount propagation', `${pods} receives the host's later mounts (${optional.join(' ')})`);
  }
  return fail('mount propagation', `${pods} is a private mount: memory-backed emptyDirs the kubelet mounts after the agent started are invisible to it, ` +
    'so it writes beneath them and pods never see the files. Set mountPropagation: HostToContainer on the kubelet-pods volumeMount ' +
    '(the chart and daemonset.yaml do); on the host, the kubelet root must be on a shared mount (`findmnt -o TARGET,PROPAGATION ' + cfg.kubeletRoot + '`, ' +
    'fix with `mount --make-rshared /` or the distribution\'s setting).');
}

async function csi(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding[]> {
  const out: Finding[] = [];
  const sock = await env.lstat(cfg.csiSocket!);
  out.push(sock?.isSocket()
    ? ok('CSI socket', `${cfg.csiSocket} is a socket`)
    : fail('CSI socket', `${cfg.csiSocket} is ${sock ? 'not a socket' : 'missing'}: the agent is not serving the CSI driver here. Is it running with this --csi-socket, ` +
      'and is the plugin directory mounted at the same path as on the host (the kubelet dials the path the agent registers)?'));
  if (cfg.registrationDir) {
    const reg = path.join(cfg.registrationDir, `${DRIVER_NAME}-reg.sock`);
    const st = await env.lstat(reg);
    out.push(st?.isSocket()
      ? ok('CSI registration socket', `${reg} is a socket`)
      : fail('CSI registration socket', `${reg} is ${st ? 'not a socket' : 'missing'}: the kubelet's plugin watcher cannot find the driver. ` +
        `Mount the kubelet's plugins_registry directory at ${cfg.registrationDir} (hostPath) and keep --registration-dir pointing at it.`));
  }
  out.push(await apiCheck('CSI driver registered with the kubelet', async () => {
    const n = await env.api.json<{ spec?: { drivers?: { name: string; nodeID?: string }[] } }>('GET', `/apis/storage.k8s.io/v1/csinodes/${cfg.nodeName}`);
    const d = n.spec?.drivers?.find((x) => x.name === DRIVER_NAME);
    return d ? ok('CSI driver registered with the kubelet', `CSINode ${cfg.nodeName} lists ${DRIVER_NAME} (node ID ${d.nodeID ?? '?'})`)
      : fail('CSI driver registered with the kubelet', `CSINode ${cfg.nodeName} does not list ${DRIVER_NAME}: the kubelet has not registered the driver. ` +
        'Check the kubelet log for "plugin_watcher" and "RegisterPlugin" lines; the registration socket must be in the kubelet\'s plugins_registry.');
  }));
  out.push(await apiCheck('CSIDriver object', async () => {
    const d = await env.api.json<{ spec?: Record<string, unknown> }>('GET', `/apis/storage.k8s.io/v1/csidrivers/${DRIVER_NAME}`);
    const want = { attachRequired: false, podInfoOnMount: true, fsGroupPolicy: 'None' };
    const wrong = Object.entries(want).filter(([k, v]) => d.spec?.[k] !== v).map(([k, v]) => `${k} should be ${String(v)}`);
    const modes = d.spec?.volumeLifecycleModes as string[] | undefined;
    if (!modes?.includes('Ephemeral')) wrong.push('volumeLifecycleModes should include Ephemeral');
    return wrong.length === 0 ? ok('CSIDriver object', `${DRIVER_NAME} matches what the agent serves`)
      : fail('CSIDriver object', `${DRIVER_NAME} differs from what the agent serves: ${wrong.join('; ')}. Re-apply the CSIDriver from daemonset.yaml (or the chart).`);
  }, `The CSIDriver ${DRIVER_NAME} does not exist: apply it from daemonset.yaml (or the chart with csi.enabled=true); without it the kubelet never calls the driver.`));
  return out;
}

/** An API check; a 403 is a SKIP (doctor may run with less RBAC than it would need to look), a 404 `missing` if given. */
async function apiCheck(check: string, fn: () => Promise<Finding>, missing?: string): Promise<Finding> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) return { verdict: 'SKIP', check, message: `not allowed to look (${err.message}); run doctor with a kubeconfig that may` };
    if (err instanceof ApiError && err.status === 404 && missing) return fail(check, missing);
    // Say whose fault it is: credentials that could not be loaded here, credentials the
    // server refused, or no answer at all (the network path).
    if (err instanceof KubeconfigError) return fail(check, `the credentials could not be loaded: ${err.message}. Fix the kubeconfig (or, in the pod, the service account token mount).`);
    if (err instanceof ApiError && err.status === 401) return fail(check, `the API server refused the credentials (${err.message}): the token or client certificate is wrong or expired.`);
    if (err instanceof ApiError) return fail(check, `the API server answered with an error: ${err.message}.`);
    return fail(check, `the API server did not answer: ${String(err)}. Check the node's network path to the API server and its address in the kubeconfig.`);
  }
}

async function rbac(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding[]> {
  const can = async (verb: string, resource: string) => (await env.api.json<{ status?: { allowed?: boolean } }>('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
    { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { verb, resource, namespace: 'default' } } })).status?.allowed === true;
  const findings: Finding[] = [];
  findings.push(await apiCheck('API server', async () => {
    const v = await env.api.json<{ gitVersion?: string }>('GET', '/version');
    return ok('API server', `reachable, Kubernetes ${v.gitVersion ?? '?'}`);
  }));
  if (findings[0]!.verdict !== 'OK') return findings;
  findings.push(await apiCheck('RBAC', async () => {
    const missing = [];
    for (const [verb, resource] of NEEDED) if (!(await can(verb, resource))) missing.push(`${verb} ${resource}`);
    const extra = [];
    for (const [verb, resource] of FORBIDDEN) if (await can(verb, resource)) extra.push(`${verb} ${resource}`);
    if (missing.length > 0) {
      return fail('RBAC', `the agent may not ${missing.join(', ')}: re-apply the ClusterRole ownerrefs-agent and its binding from daemonset.yaml (or the chart).`);
    }
    if (extra.length > 0) {
      return { verdict: 'WARN', check: 'RBAC', message: `the agent may also ${extra.join(', ')}, which it never needs: bind it only to the ClusterRole ownerrefs-agent (SECURITY.md).` };
    }
    return ok('RBAC', `may ${NEEDED.map(([v, r]) => `${v} ${r}`).join(', ')}; nothing more of what was checked`);
  }));
  findings.push(await apiCheck('token', async () => {
    // The agent's ValidatingAdmissionPolicy lets it patch only pods of the node its token names.
    const r = await env.api.json<{ status?: { userInfo?: { username?: string; extra?: Record<string, string[]> } } }>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
    const named = r.status?.userInfo?.extra?.[NODE_NAME_EXTRA]?.[0];
    if (named === cfg.nodeName) return ok('token', `names node ${named}: the agent may set the annotations of this node's pods`);
    return fail('token', named === undefined
      ? 'the credentials name no node, so the agent\'s policy refuses every annotation write: run the agent with the DaemonSet pod\'s own service account token (bound to the pod), not a token made for the ServiceAccount alone'
      : `the credentials name node ${named}, not ${cfg.nodeName}: the agent's policy refuses its writes to this node's pods; run it with its own pod's token`);
  }));
  return findings;
}

async function node(cfg: DoctorConfig, env: DoctorEnv): Promise<Finding> {
  return apiCheck('Node', async () => {
    const n = await env.api.json<{ metadata?: { labels?: Record<string, string> } }>('GET', `/api/v1/nodes/${encodeURIComponent(cfg.nodeName)}`);
    const { settings, invalid } = settingsFromLabels(n.metadata?.labels);
    if (invalid.length > 0) return fail('Node', invalid.map((i) => i.message).join('; '));
    const on = Object.entries(settings).filter(([, v]) => v).map(([k]) => k);
    return ok('Node', `${cfg.nodeName} found; settings from its labels: ${on.join(', ') || 'none on'}`);
  }, `Node ${cfg.nodeName} does not exist: --node-name (NODE_NAME) must be this node's name, as \`kubectl get nodes\` shows it (the DaemonSet sets it from spec.nodeName).`);
}

/** One line per finding: messages quote flag values and API answers, so controls are escaped. */
export function formatFindings(findings: readonly Finding[]): string {
  return findings.map((f) => `${f.verdict.padEnd(4)} ${f.check}: ${oneLine(f.message)}`).join('\n') + '\n';
}

/** The real environment. */
export function processEnv(api: Pick<ApiClient, 'json'>): DoctorEnv {
  const fs = process.getBuiltinModule('node:fs/promises');
  return {
    lstat: (p) => fs.lstat(p).catch(() => undefined),
    readdir: (p) => fs.readdir(p).catch(() => undefined),
    mountinfo: () => fs.readFile('/proc/self/mountinfo', 'utf8').catch(() => ''),
    api,
    agentMetrics: async ({ host, port }) => {
      const url = `http://${localUrlHost(host)}:${port}/metrics`;
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        return res.ok ? await res.text() : undefined;
      } catch {
        return undefined;
      }
    },
  };
}


export const DOCTOR_HELP = `Usage: ownerrefs-agent doctor [run's flags]

Checks what the agent depends on and says, for each, OK or what is wrong and the fix: the
kubelet root and its pods directory, mount propagation, the CSI and registration sockets,
the kubelet's registration of the driver (CSINode), the CSIDriver object, the API server,
the agent's RBAC (SelfSubjectAccessReview: what it needs, and nothing it should not have),
the Node and its labels, and the running agent's refused annotation writes. In the agent's pod it
reads the agent's own flags:
  kubectl -n ownerrefs-system exec ds/ownerrefs-agent -- ownerrefs-agent doctor
On a node, pass run's flags (--node-name, --kubeconfig, --kubelet-root, --csi-socket, ...).
Exit 0 when nothing failed, 1 when something did.
`;

/** The running agent's flags, when doctor runs in its container (PID 1 is \`ownerrefs-agent run ...\`). */
export async function agentArgsOfPid1(read: (p: string) => Promise<string>): Promise<string[] | undefined> {
  const argv = (await read('/proc/1/cmdline').catch(() => '')).split('\0').filter(Boolean);
  const at = argv.indexOf('run');
  return at >= 0 && argv.slice(0, at).some((a) => a.endsWith('main.js') || a.endsWith('main.ts')) ? argv.slice(at + 1) : undefined;
}
