// Runs the gate's lifter (`node agent/main.ts gate`) as a child process, with credentials of
// the ServiceAccount admission-policy.yaml makes for it (so exactly its RBAC, and its bounding
// policy applies), in place of the Deployment: the test control plane has no cluster network.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { AGENT_ENV } from '../agent/config.ts';
import { GATE_NAME } from '../agent/manifests/gate.ts';
import { WEBHOOK_NAMESPACE } from '../projections/names.ts';
import { apply, serviceAccountKubeconfig } from './agentproc.ts';
import { capture, metricSum } from './childlogs.ts';
import { waitFor } from './wait.ts';

const MAIN = path.join(import.meta.dirname, '..', 'agent', 'main.ts');

export interface GateProcess {
  readonly child: ChildProcess;
  logs(): string;
  metric(name: string, labels?: string): Promise<number>;
  stop(): Promise<number | null>;
}

const running = new Set<ChildProcess>();
process.on('exit', () => { for (const c of running) c.kill('SIGKILL'); });

/**
 * Applies `rbac` (the ServiceAccount, ClusterRole and binding of admission-policy.yaml), then
 * starts the lifter with that ServiceAccount's token and waits until it has listed the gated pods.
 */
export async function startGate(admin: KubeConfig, dir: string, rbac: KubernetesObject[], opts: { args?: readonly string[] } = {}): Promise<GateProcess> {
  await apply(admin, rbac);
  const kubeconfig = await serviceAccountKubeconfig(admin, { namespace: WEBHOOK_NAMESPACE, name: GATE_NAME }, path.join(dir, 'gate.kubeconfig'));
  const child = spawn(process.execPath, [MAIN, 'gate', `--kubeconfig=${kubeconfig}`, '--health-addr=127.0.0.1:0', '--log-level=debug', ...opts.args ?? []],
    // No shutdown delay unless a test asks for one (a flag wins over the variable): stop() is then prompt.
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...AGENT_ENV, OWNERREFS_SHUTDOWN_DELAY_SECONDS: '0' } });
  running.add(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => { running.delete(child); r(code); }));
  const out = capture(child, 'gate');
  const line = await out.line('gate lifting', 'gate start');
  const health = `http://127.0.0.1:${line.healthPort as number}`;
  await waitFor(async () => (await fetch(`${health}/readyz`)).status === 200 || undefined, { describe: 'gate ready', diagnostics: () => out.text().slice(-4000) });
  return {
    child,
    logs: () => out.text(),
    metric: async (name, labels) => metricSum(await (await fetch(`${health}/metrics`)).text(), name, labels),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
