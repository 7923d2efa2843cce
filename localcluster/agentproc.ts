// Runs the real agent (`node agent/main.ts run`) as a child process against the
// test control plane, with credentials that carry exactly the RBAC in daemonset.yaml.

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, KubernetesObjectApi, PatchStrategy, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { AGENT_ENV, NODE_FLAGS } from '../agent/config.ts';
import { IMAGES } from './node/realnode.ts';
import { metricSum } from './childlogs.ts';

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
  readonly pid: number;
  /** CLOCK_MONOTONIC ms (process.hrtime) at spawn, and when the 'agent started' log line arrived. */
  readonly spawnedAt: number;
  readonly startedAt: number;
  /** Parsed JSON log lines so far. */
  readonly lines: Record<string, unknown>[];
  logs(): string;
  get(pathname: string): Promise<{ status: number; body: string }>;
  /** Every series of /metrics, by its name with labels. */
  metrics(): Promise<Map<string, number>>;
  /** Counter value from /metrics, summed over label sets matching `labels` (substring). */
  metric(name: string, labels?: string): Promise<number>;
  /** /readyz answers 200; throws once the agent has exited. */
  ready(): Promise<boolean>;
  /**
   * For a failure message: the agent's watch and request metrics and the tail of its log.
   * Never throws and never hangs (a stopped or frozen agent answers nothing).
   */
  report(): Promise<string>;
  /** SIGTERM (default) or SIGKILL, then SIGKILL after `killAfterMs` if given; resolves with the exit code. */
  stop(signal?: NodeJS.Signals, killAfterMs?: number): Promise<number | null>;
}

/** Series a failure report shows: is the agent connected, how often did it reconnect or relist, what did it ask. */
const REPORTED_METRICS = ['ownerrefs_watch_starts_total', 'ownerrefs_relists_total', 'ownerrefs_first_states_total', 'ownerrefs_api_requests_total', 'ownerrefs_pods_tracked', 'ownerrefs_volumes_tracked'];
const REPORTED_LOG_LINES = 60;

// Agents still running when the process exits (a crash, say) go with it.
const running = new Set<ChildProcess>();
process.on('exit', () => { for (const c of running) c.kill('SIGKILL'); });

const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

/**
 * The one way tests, benchmarks, the soak and the demo run an agent: `main` (default
 * agent/main.ts from source; the benchmarks and the soak pass a compiled one) with the flags it
 * ships with, on this machine, its health server on a free loopback port.
 */
export async function startAgentProcess(opts: {
  kubeconfig: string; nodeName: string; kubeletRoot: string; args?: string[];
  /** Entry point; default agent/main.ts run from source. */
  main?: string;
  env?: Record<string, string>;
  /** The Node flags the agent ships with; default NODE_FLAGS (a baseline build passes its own). */
  nodeFlags?: readonly string[];
  /** Node flags after those (later ones win): --cpu-prof, or a V8 setting to try under the soak. */
  extraNodeFlags?: string[];
  /** Default debug (tests read its lines); the benchmarks run info, as shipped. */
  logLevel?: string;
  /** How long it may take to log 'agent started'. */
  startTimeoutMs?: number;
  /** stop()'s SIGKILL after this long, when it is given no bound of its own (default: none). */
  killAfterMs?: number;
}): Promise<AgentProcess> {
  const spawnedAt = monotonicMs();
  const child = spawn(process.execPath, [...(opts.nodeFlags ?? NODE_FLAGS), ...(opts.extraNodeFlags ?? []), opts.main ?? MAIN, 'run',
    `--node-name=${opts.nodeName}`, `--kubeconfig=${opts.kubeconfig}`, `--kubelet-root=${opts.kubeletRoot}`,
    '--health-addr=127.0.0.1:0', `--log-level=${opts.logLevel ?? 'debug'}`, ...(opts.args ?? [])],
  { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...AGENT_ENV, ...opts.env } });
  running.add(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => { running.delete(child); r(code); }));
  let raw = '';
  const lines: Record<string, unknown>[] = [];
  let partial = '';
  let started: (line: { healthPort: number; at: number }) => void;
  const startLine = new Promise<{ healthPort: number; at: number }>((r) => (started = r));
  child.stdout!.on('data', (d: Buffer) => {
    const at = monotonicMs();
    raw += d.toString();
    partial += d.toString();
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const l of parts) {
      try {
        const j = JSON.parse(l) as Record<string, unknown>;
        lines.push(j);
        if (j.msg === 'agent started') started({ healthPort: j.healthPort as number, at });
      } catch { /* not JSON */ }
    }
  });
  child.stderr!.on('data', (d: Buffer) => (raw += d.toString()));
  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  let timer: NodeJS.Timeout | undefined;
  // Rejects only if the agent exits before it started; handled here, so a later exit is no unhandled rejection.
  const diedFirst = exited.then((code) => { throw new Error(`agent exited ${code}:\n${raw}`); });
  diedFirst.catch(() => {});
  const { healthPort, at: startedAt } = await Promise.race([
    startLine,
    diedFirst,
    new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`agent start: no 'agent started' line within ${timeoutMs} ms\n${raw.slice(-4000)}`)), timeoutMs); }),
  ]).finally(() => clearTimeout(timer));
  const get = async (pathname: string) => {
    const res = await fetch(`http://127.0.0.1:${healthPort}${pathname}`);
    return { status: res.status, body: await res.text() };
  };
  const metrics = async () => {
    const m = new Map<string, number>();
    for (const l of (await get('/metrics')).body.split('\n')) {
      if (!l || l.startsWith('#')) continue;
      const sp = l.lastIndexOf(' ');
      m.set(l.slice(0, sp), Number(l.slice(sp + 1)));
    }
    return m;
  };
  return {
    healthPort, child, pid: child.pid!, spawnedAt, startedAt, lines,
    logs: () => raw,
    get,
    metrics,
    metric: async (name, labels) => metricSum((await get('/metrics')).body, name, labels),
    async ready() {
      if (child.exitCode !== null) throw new Error(`the agent exited (${child.exitCode}) before it was ready: ${raw.slice(-2000)}`);
      try {
        return (await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status === 200;
      } catch {
        return false;
      }
    },
    async report() {
      const exit = child.exitCode !== null || child.signalCode !== null ? ` (exited: code ${child.exitCode}, signal ${child.signalCode})` : '';
      const metrics = await fetch(`http://127.0.0.1:${healthPort}/metrics`, { signal: AbortSignal.timeout(2_000) })
        .then(async (r) => (await r.text()).split('\n').filter((l) => REPORTED_METRICS.some((m) => l.startsWith(m))).join('\n'),
          (err: unknown) => `(no /metrics: ${String(err)})`);
      return `--- agent pid ${child.pid}${exit}: watch metrics ---\n${metrics}\n` +
        `--- agent log (last ${REPORTED_LOG_LINES} lines) ---\n${raw.split('\n').slice(-REPORTED_LOG_LINES - 1).join('\n')}`;
    },
    async stop(signal = 'SIGTERM', killAfterMs = opts.killAfterMs) {
      if (child.exitCode === null) child.kill(signal);
      const t = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}
