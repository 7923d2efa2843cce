// Runs the real admission webhook (`node agent/main.ts webhook`) as a child process, with
// credentials that carry exactly the RBAC in webhook.yaml, self-managed TLS for 127.0.0.1,
// and registers it with the API server through clientConfig.url (no Service: the test
// control plane has no cluster network). The webhook then puts its own CA into caBundle.

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { AdmissionregistrationV1Api, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { AGENT_ENV } from '../agent/config.ts';
import { webhookConfiguration, type ClientConfig } from '../agent/manifests/webhookconfig.ts';
import { WEBHOOK_NAMESPACE } from '../projections/names.ts';
import { apply, serviceAccountKubeconfig } from './agentproc.ts';
import { capture, metricSum } from './childlogs.ts';
import { waitFor } from './wait.ts';

const ROOT = path.join(import.meta.dirname, '..');
const MAIN = path.join(ROOT, 'agent', 'main.ts');

/** Every object in webhook.yaml, as written. */
export function webhookManifest(): KubernetesObject[] {
  return parseAllDocuments(readFileSync(path.join(ROOT, 'webhook.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject).filter(Boolean);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** A kubeconfig holding a TokenRequest token for webhook.yaml's ServiceAccount (reaching the API server at `server`, if given). */
async function webhookKubeconfig(admin: KubeConfig, dir: string, server?: string): Promise<string> {
  await apply(admin, webhookManifest().filter((o) => ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind!)));
  return serviceAccountKubeconfig(admin, { namespace: WEBHOOK_NAMESPACE, name: 'ownerrefs-webhook' }, path.join(dir, 'webhook.kubeconfig'), server);
}

export interface WebhookProcess {
  readonly port: number;
  readonly healthPort: number;
  readonly child: ChildProcess;
  logs(): string;
  metric(name: string, labels?: string): Promise<number>;
  stop(): Promise<number | null>;
  /**
   * Stops it and deletes its MutatingWebhookConfiguration: what a file on the shared API
   * server must do last, or every later file's pods in the syntax are refused (failurePolicy
   * Fail, nothing listening).
   */
  remove(): Promise<void>;
  /** Start the same webhook again (same port, same Secret: the CA carries over). */
  restart(): Promise<WebhookProcess>;
}

const running = new Set<ChildProcess>();
process.on('exit', () => { for (const c of running) c.kill('SIGKILL'); });

export interface WebhookOptions {
  /** Entry point; default agent/main.ts from source. The benchmark passes the compiled one. */
  main?: string;
  /** Node flags before the entry point (the image's: NODE_FLAGS). */
  nodeFlags?: readonly string[];
  /** More flags of `webhook`. */
  args?: readonly string[];
  /** Where the webhook reaches the API server (a fault proxy), if not directly. */
  apiServer?: string;
}

/**
 * Registers the configuration of webhook.yaml with clientConfig.url on a free loopback
 * port, starts the webhook there, and waits until the API server trusts it (caBundle set).
 * The namespace must exist (daemonset.yaml makes it).
 */
export async function startWebhook(admin: KubeConfig, dir: string, opts: WebhookOptions = {}): Promise<WebhookProcess> {
  const [w] = await startWebhooks(admin, dir, { ...opts, replicas: 1, clientConfig: ([port]) => ({ url: `https://127.0.0.1:${port}/mutate` }) });
  return w!;
}

/**
 * `replicas` webhook processes sharing one Secret (so one CA), each on its own loopback
 * port, behind the one configuration that clientConfig(ports) registers (a URL, or a Service
 * whose endpoints the caller provides: bench/support/replicas.ts). Started one after the
 * other: each waits until the API server trusts it.
 */
export async function startWebhooks(admin: KubeConfig, dir: string, opts: WebhookOptions & { replicas: number; clientConfig(ports: number[]): ClientConfig }): Promise<WebhookProcess[]> {
  const kubeconfig = await webhookKubeconfig(admin, dir, opts.apiServer);
  const ports: number[] = [];
  while (ports.length < opts.replicas) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  const cfg = webhookConfiguration(opts.clientConfig(ports));
  const reg = admin.makeApiClient(AdmissionregistrationV1Api);
  await reg.deleteMutatingWebhookConfiguration({ name: 'ownerrefs.dev' }).catch(() => undefined);
  await reg.createMutatingWebhookConfiguration({ body: cfg as never });
  const out: WebhookProcess[] = [];
  for (const port of ports) out.push(await launch(reg, kubeconfig, port, opts));
  return out;
}

async function launch(reg: AdmissionregistrationV1Api, kubeconfig: string, port: number, opts: WebhookOptions): Promise<WebhookProcess> {
  const child = spawn(process.execPath, [...opts.nodeFlags ?? [], opts.main ?? MAIN, 'webhook', `--kubeconfig=${kubeconfig}`, `--listen=127.0.0.1:${port}`, '--health-addr=127.0.0.1:0',
    `--namespace=${WEBHOOK_NAMESPACE}`, '--extra-san=127.0.0.1', '--log-level=debug', ...opts.args ?? []], { stdio: ['ignore', 'pipe', 'pipe'],
    // No Service in front of it: nothing to wait for at SIGTERM (a test can pass --shutdown-delay-seconds).
    env: { ...process.env, ...AGENT_ENV, OWNERREFS_SHUTDOWN_DELAY_SECONDS: '0' } });
  running.add(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => { running.delete(child); r(code); }));
  const out = capture(child, 'webhook');
  const raw = () => out.text();
  const line = await out.line('webhook serving', 'webhook start');
  const healthPort = line.healthPort as number;
  await waitFor(async () => (await reg.readMutatingWebhookConfiguration({ name: 'ownerrefs.dev' })).webhooks?.every((w) => w.clientConfig.caBundle) || undefined,
    { describe: 'the webhook puts its CA in caBundle', diagnostics: () => raw().slice(-4000) });
  const w: WebhookProcess = {
    port, healthPort, child,
    logs: raw,
    metric: async (name, labels) => metricSum(await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text(), name, labels),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
    async remove() {
      await w.stop();
      await reg.deleteMutatingWebhookConfiguration({ name: 'ownerrefs.dev' }).catch((err: unknown) => { if ((err as { code?: number }).code !== 404) throw err; });
    },
    restart: () => launch(reg, kubeconfig, port, opts),
  };
  return w;
}
