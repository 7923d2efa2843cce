// Helpers for e2e tests running against the control plane that
// test/globalSetup.ts starts once per run.
import { randomBytes } from 'node:crypto';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { inject, type ProvidedContext } from 'vitest';
import { KubeApiClient } from '../../agent/kube/client.ts';
import { KubeCredentials } from '../../agent/kube/kubeconfig.ts';
import { tailLogs } from '../../localcluster/controlplane/logs.ts';
import { waitFor as baseWaitFor, type WaitOptions } from '../../localcluster/wait.ts';

/** What test/globalSetup.ts provides about the shared control plane. */
export type ClusterInfo = ProvidedContext;

export function clusterInfo(): ClusterInfo {
  const kubeconfigPath = inject('kubeconfigPath');
  if (!kubeconfigPath) throw new Error('no control plane: run this test in the e2e vitest project');
  return {
    kubeconfigPath,
    server: inject('server'),
    caPath: inject('caPath'),
    nodeName: inject('nodeName'),
    workDir: inject('workDir'),
    logsDir: inject('logsDir'),
    components: inject('components'),
    binDir: inject('binDir'),
  };
}

// Admin (system:masters) client configuration for the test cluster.
export function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(clusterInfo().kubeconfigPath);
  return kc;
}

// HTTP status of a failed client-node call, if it carries one.
export function apiStatus(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e.code === 'number') return e.code;
  return typeof e.statusCode === 'number' ? e.statusCode : undefined;
}

/** The status code and message of a refused client-node call, or 200 and '' when it went through (attack tests read both). */
export async function outcome(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
    return { code: 200, message: '' };
  } catch (err) {
    const body = (err as { body?: unknown }).body;
    return { code: apiStatus(err) ?? 0, message: (JSON.parse(String(body)) as { message: string }).message };
  }
}

export interface WaitForOptions extends WaitOptions {
  // Control-plane logs to tail on timeout; defaults to the shared control plane's.
  logsDir?: string;
}

// waitFor from wait.ts, with the tail of every control-plane component log on timeout.
export function waitFor<T>(fn: () => T | Promise<T>, opts: WaitForOptions = {}): Promise<NonNullable<T>> {
  const logsDir = opts.logsDir ?? inject('logsDir');
  return baseWaitFor(fn, {
    timeoutMs: 60_000,
    intervalMs: 100,
    ...opts,
    diagnostics: async () => [await opts.diagnostics?.(), logsDir ? tailLogs(logsDir, 15) : ''].filter(Boolean).join('\n'),
  });
}

/** How long cleanup() lets the kubelet finish its pods' graceful deletion before forcing it. */
const NAMESPACE_DRAIN_MS = 30_000;

export interface TestNamespace {
  name: string;
  cleanup(): Promise<void>;
}

// Creates a uniquely named namespace and waits for its default ServiceAccount,
// without which the ServiceAccount admission plugin rejects pods (or creates
// it when the run has no controller-manager). cleanup() requests its deletion and
// then waits, bounded, for its pods to go; it must run while the file's kubelet
// emulator still runs (a pod bound to a node terminates only when a kubelet says so).
// Pods still there after the wait are force-deleted: the e2e files share one node, and
// a pod left terminating on it would be the next file's agent's business.
export async function newNamespace(prefix: string, kc: KubeConfig = kubeConfig()): Promise<TestNamespace> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = `${prefix}-${randomBytes(3).toString('hex')}`.toLowerCase().slice(0, 63);
  await core.createNamespace({
    body: { metadata: { name, labels: { 'ownerrefs.dev/test': 'true' } } },
  });
  if (inject('components')?.controllerManager === false) {
    // envtest-style binaries: no serviceaccount controller will make it.
    await core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
  } else {
    await waitFor(async () => core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
      { describe: `default ServiceAccount in ${name}` });
  }
  return {
    name,
    cleanup: async () => {
      try {
        await core.deleteNamespace({ name, propagationPolicy: 'Background' });
      } catch (err) {
        if (apiStatus(err) !== 404) throw err;
      }
      const left = () => core.listNamespacedPod({ namespace: name }).then((l) => l.items, () => []);
      const deadline = Date.now() + NAMESPACE_DRAIN_MS;
      while (Date.now() < deadline && (await left()).length > 0) await new Promise((r) => setTimeout(r, 250));
      for (const p of await left()) {
        await core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: name, gracePeriodSeconds: 0 }).catch(() => undefined);
      }
    },
  };
}

/** The API server's own /metrics text, read as the admin of `kubeconfigPath`. */
export async function apiServerMetrics(kubeconfigPath: string): Promise<string> {
  const api = new KubeApiClient(KubeCredentials.fromFile(kubeconfigPath));
  try {
    let text = '';
    for await (const c of await api.stream('/metrics', new AbortController().signal)) text += String(c);
    return text;
  } finally {
    api.close();
  }
}

/** The sum of a metric's series whose labels include every `labels` pair (label="value" substrings). */
export function seriesSum(text: string, name: string, ...labels: string[]): number {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) && labels.every((x) => l.includes(x)))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}
