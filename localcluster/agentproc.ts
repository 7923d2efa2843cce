// Runs the real agent (`node agent/main.ts run`) as a child process against the
// test control plane, with credentials that carry exactly the RBAC in daemonset.yaml.

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, KubernetesObjectApi, PatchStrategy, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { AGENT_ENV, NODE_FLAGS } from '../agent/config.ts';
import { IMAGES } from './node/realnode.ts';
import { waitFor } from './wait.ts';

const ROOT = path.join(import.meta.dirname, '..');
const MAIN = path.join(ROOT, 'agent', 'main.ts');

/** Every object in daemonset.yaml, as written. */
export function manifestObjects(): KubernetesObject[] {
  return parseAllDocuments(readFileSync(path.join(ROOT, 'daemonset.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject);
}

/** Server-side apply (optionally dry-run) of objects as the admin. */
export async function apply(kc: KubeConfig, objs: KubernetesObject[], dryRun = false): Promise<KubernetesObject[]> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const out: KubernetesObject[] = [];
  for (const o of objs) out.push(await api.patch(o, undefined, dryRun ? 'All' : undefined, 'ownerrefs-e2e', true, PatchStrategy.ServerSideApply));
  return out;
}

/**
 * Applies daemonset.yaml's objects but the DaemonSet (there is no image to run here): the
 * Namespace, ServiceAccount, ClusterRole and binding, and the ValidatingAdmissionPolicy that
 * bounds the agent's pod patches. Then writes a kubeconfig holding a TokenRequest token for
 * that ServiceAccount, bound to a pod of it on `nodeName`, as the DaemonSet pod's own token
 * is: the API server names the node in the token's user info, which the policy checks. The
 * agent then has exactly the shipped RBAC and policy.
 */
export async function agentKubeconfig(admin: KubeConfig, dir: string, opts: { nodeName: string; server?: string | undefined }): Promise<string> {
  const objs = manifestObjects().filter((o) => o.kind !== 'DaemonSet');
  await apply(admin, objs);
  const sa = objs.find((o) => o.kind === 'ServiceAccount')!;
  const ref = { namespace: sa.metadata!.namespace!, name: sa.metadata!.name! };
  const pod = await agentPod(admin, ref, opts.nodeName);
  return serviceAccountKubeconfig(admin, ref, path.join(dir, 'agent.kubeconfig'), opts.server, pod);
}

/**
 * The pod the agent's token is bound to: the ServiceAccount's, on the node, running the
 * node's pause image (on a real node; other nodes run nothing). One per node, reused.
 */
async function agentPod(admin: KubeConfig, sa: { namespace: string; name: string }, nodeName: string): Promise<{ name: string; uid: string }> {
  const core = admin.makeApiClient(CoreV1Api);
  const name = `ownerrefs-agent-token-${nodeName}`.slice(0, 253);
  const existing = await core.readNamespacedPod({ name, namespace: sa.namespace }).catch(() => undefined);
  const pod = existing ?? await core.createNamespacedPod({ namespace: sa.namespace, body: {
    metadata: { name, labels: { 'app.kubernetes.io/name': 'ownerrefs-agent-token' } },
    spec: {
      nodeName, serviceAccountName: sa.name, automountServiceAccountToken: false, terminationGracePeriodSeconds: 0,
      tolerations: [{ operator: 'Exists' }],
      containers: [{ name: 'pause', image: IMAGES.pause, imagePullPolicy: 'Never' }],
    },
  } });
  return { name, uid: pod.metadata!.uid! };
}

/** Writes `file`, a kubeconfig holding a TokenRequest token (6 h) for the ServiceAccount, bound to `pod` when given. */
export async function serviceAccountKubeconfig(admin: KubeConfig, sa: { namespace: string; name: string }, file: string, server?: string, pod?: { name: string; uid: string }): Promise<string> {
  const tr = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: sa.name, namespace: sa.namespace, body: { spec: { audiences: [], expirationSeconds: 3600 * 6,
      ...(pod ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid } } : {}) } },
  });
  const cluster = admin.getCurrentCluster()!;
  const kc = {
    apiVersion: 'v1', kind: 'Config', 'current-context': sa.name,
    clusters: [{ name: 'test', cluster: { server: server ?? cluster.server, 'certificate-authority': cluster.caFile,
      'certificate-authority-data': cluster.caData } }],
    users: [{ name: sa.name, user: { token: tr.status!.token } }],
    contexts: [{ name: sa.name, context: { cluster: 'test', user: sa.name } }],
  };
  writeFileSync(file, JSON.stringify(kc), { mode: 0o600 });
  return file;
}

export interface AgentProcess {
  readonly healthPort: number;
  readonly child: ChildProcess;
  /** Parsed JSON log lines so far. */
  readonly lines: Record<string, unknown>[];
  logs(): string;
  get(pathname: string): Promise<{ status: number; body: string }>;
  /** Counter value from /metrics, summed over label sets matching `labels` (substring). */
  metric(name: string, labels?: string): Promise<number>;
  /**
   * For a failure message: the agent's watch and request metrics and the tail of its log.
   * Never throws and never hangs (a stopped or frozen agent answers nothing).
   */
  report(): Promise<string>;
  /** SIGTERM (default) or SIGKILL; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Series a failure report shows: is the agent connected, how often did it reconnect or relist, what did it ask. */
const REPORTED_METRICS = ['ownerrefs_watch_starts_total', 'ownerrefs_relists_total', 'ownerrefs_first_states_total', 'ownerrefs_api_requests_total', 'ownerrefs_pods_tracked', 'ownerrefs_volumes_tracked'];
const REPORTED_LOG_LINES = 60;

const running = new Set<ChildProcess>();
process.on('exit', () => { for (const c of running) c.kill('SIGKILL'); });

export async function startAgentProcess(opts: {
  kubeconfig: string; nodeName: string; kubeletRoot: string; args?: string[];
  /** Entry point; default agent/main.ts run from source. The soak passes the compiled one. */
  main?: string;
  env?: Record<string, string>;
  /** Node flags after NODE_FLAGS (later ones win): a V8 setting to try under the soak. */
  extraNodeFlags?: string[];
}): Promise<AgentProcess> {
  const child = spawn(process.execPath, [...NODE_FLAGS, ...(opts.extraNodeFlags ?? []), opts.main ?? MAIN, 'run',
    `--node-name=${opts.nodeName}`, `--kubeconfig=${opts.kubeconfig}`, `--kubelet-root=${opts.kubeletRoot}`,
    '--health-addr=127.0.0.1:0', '--log-level=debug', ...(opts.args ?? [])],
  { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...AGENT_ENV, ...opts.env } });
  running.add(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => { running.delete(child); r(code); }));
  let raw = '';
  const lines: Record<string, unknown>[] = [];
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    raw += d.toString();
    partial += d.toString();
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const l of parts) {
      try { lines.push(JSON.parse(l) as Record<string, unknown>); } catch { /* not JSON */ }
    }
  });
  child.stderr!.on('data', (d: Buffer) => (raw += d.toString()));
  const started = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`agent exited ${child.exitCode}:\n${raw}`);
    return lines.find((l) => l.msg === 'agent started');
  }, { timeoutMs: 30_000, describe: 'agent start', diagnostics: () => raw.slice(-4000) });
  const healthPort = started.healthPort as number;
  const get = async (pathname: string) => {
    const res = await fetch(`http://127.0.0.1:${healthPort}${pathname}`);
    return { status: res.status, body: await res.text() };
  };
  return {
    healthPort, child, lines,
    logs: () => raw,
    get,
    async metric(name, labels = '') {
      const { body } = await get('/metrics');
      return body.split('\n')
        .filter((l) => l.startsWith(name) && (l[name.length] === ' ' || l[name.length] === '{') && l.includes(labels))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    },
    async report() {
      const exit = child.exitCode !== null || child.signalCode !== null ? ` (exited: code ${child.exitCode}, signal ${child.signalCode})` : '';
      const metrics = await fetch(`http://127.0.0.1:${healthPort}/metrics`, { signal: AbortSignal.timeout(2_000) })
        .then(async (r) => (await r.text()).split('\n').filter((l) => REPORTED_METRICS.some((m) => l.startsWith(m))).join('\n'),
          (err: unknown) => `(no /metrics: ${String(err)})`);
      return `--- agent pid ${child.pid}${exit}: watch metrics ---\n${metrics}\n` +
        `--- agent log (last ${REPORTED_LOG_LINES} lines) ---\n${raw.split('\n').slice(-REPORTED_LOG_LINES - 1).join('\n')}`;
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}
