// Per-file e2e fixture: a kubelet emulator on a fresh kubelet root, and the real
// agent process running with the RBAC shipped in daemonset.yaml. Optionally on a
// private control plane (for tests that kill or compact it) and behind a fault proxy.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { tailLogs } from '../../localcluster/controlplane/logs.ts';
import type { ControlPlane } from '../../localcluster/controlplane/controlplane.ts';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from '../../localcluster/agentproc.ts';
import { startEmulatorNode, startLocalControlPlane, type EmulatorNode, type LocalControlPlane } from '../../localcluster/clusters.ts';
import { clusterInfo, kubeConfig, newNamespace, waitFor, type TestNamespace } from './cluster.ts';
import type { KubeletEmulator } from '../../localcluster/kubelet/emulator.ts';
import { startFaultProxy, type FaultProxy } from './proxy.ts';

export interface E2E {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  ns: string;
  kubelet: KubeletEmulator;
  agent: AgentProcess;
  nodeName: string;
  kubeletRoot: string;
  /** Set with { privateControlPlane }. */
  cp?: ControlPlane;
  /** Set with { proxy: true }: the agent reaches the API server only through it. */
  proxy?: FaultProxy;
  /** Starts a new agent process (after the old one was stopped or killed). */
  restartAgent(): Promise<AgentProcess>;
  /** Content of a projected file of a pod, or undefined while it is absent. */
  file(pod: V1Pod, name?: string, volume?: string): string | undefined;
  /** Waits until the pod's file satisfies `ok`. */
  waitForFile(pod: V1Pod, ok: (text: string) => boolean, describe: string, name?: string): Promise<string>;
  /** The pods, the agent's metrics and log tail, the emulator's errors: printed for every failed test. */
  diagnostics(): Promise<string>;
}

export interface E2EOptions {
  agentArgs?: string[];
  /** Run on a control plane of this file's own, with a node of this name. */
  privateControlPlane?: string;
  /** With privateControlPlane: the API server's --feature-gates. */
  apiserverFeatureGates?: string;
  proxy?: boolean;
}

/** Registers beforeAll/afterAll hooks; the returned object is filled in before tests run. */
export function useE2E(prefix: string, opts: E2EOptions = {}): E2E {
  const e = {} as E2E;
  let ns: TestNamespace;
  let agentKc: string;
  let privateCp: LocalControlPlane | undefined;
  let node: EmulatorNode | undefined;
  const logsDir = () => e.cp?.logsDir ?? clusterInfo().logsDir;
  beforeAll(async () => {
    if (opts.privateControlPlane) {
      privateCp = await startLocalControlPlane({ binDir: clusterInfo().binDir, nodeName: opts.privateControlPlane, apiserverFeatureGates: opts.apiserverFeatureGates });
      e.cp = privateCp.cp;
      e.kc = privateCp.kc;
      e.nodeName = opts.privateControlPlane;
    } else {
      e.kc = kubeConfig();
      e.nodeName = clusterInfo().nodeName;
    }
    e.core = e.kc.makeApiClient(CoreV1Api);
    e.apps = e.kc.makeApiClient(AppsV1Api);
    ns = await newNamespace(prefix, e.kc);
    e.ns = ns.name;
    node = await startEmulatorNode({ kc: e.kc, name: e.nodeName });
    e.kubeletRoot = node.kubeletRoot;
    e.kubelet = node.kubelet;
    if (opts.proxy) e.proxy = await startFaultProxy(Number(new URL(e.kc.getCurrentCluster()!.server).port));
    agentKc = await agentKubeconfig(e.kc, e.kubeletRoot, { nodeName: e.nodeName, server: e.proxy ? `https://${e.proxy.address}` : undefined });
    e.restartAgent = async () => {
      e.agent = await startAgentProcess({ kubeconfig: agentKc, nodeName: e.nodeName, kubeletRoot: e.kubeletRoot, args: opts.agentArgs ?? [] });
      await waitFor(async () => (await e.agent.get('/readyz')).status === 200, { describe: 'agent ready', diagnostics: e.diagnostics, logsDir: logsDir() });
      return e.agent;
    };
    e.diagnostics = async () => {
      const pods = await e.core.listNamespacedPod({ namespace: e.ns }).then((l) => l.items.map((p) =>
        `${p.metadata!.name} uid=${p.metadata!.uid} labels=${JSON.stringify(p.metadata!.labels)} owners=${JSON.stringify(p.metadata!.ownerReferences?.map((o) => o.name))}` +
        ` deleting=${p.metadata!.deletionTimestamp !== undefined} phase=${p.status?.phase}`).join('\n'), (err: unknown) => String(err));
      return `--- pods in ${e.ns} ---\n${pods}\n${await e.agent?.report()}\n` +
        `--- kubelet emulator errors ---\n${e.kubelet.errors.slice(-10).join('\n')}`;
    };
    e.file = (pod, name = 'ownerReferences', volume = 'podinfo') => {
      const p = path.join(e.kubelet.volumeDir(pod.metadata!.uid!, volume), name);
      return existsSync(p) ? readFileSync(p, 'utf8') : undefined;
    };
    e.waitForFile = (pod, ok, describe, name) =>
      waitFor(() => { const t = e.file(pod, name); return t !== undefined && ok(t) ? t : undefined; },
        { timeoutMs: 60_000, describe: `${pod.metadata!.name}: ${describe}`, logsDir: logsDir() });
    await e.restartAgent();
  });
  // Every failed test prints what it takes to diagnose it without a rerun: the agent's
  // side here, and the control plane's log tails (a waitFor timeout already carries those).
  beforeEach((ctx) => {
    ctx.onTestFailed(async ({ task }) => {
      const timedOut = task.result?.errors?.some((err) => /^timed out after/.test(err.message ?? '')) ?? false;
      const cp = timedOut ? '' : `\n${tailLogs(logsDir(), 15)}`;
      console.error(`=== diagnostics for "${task.name}" ===\n${await e.diagnostics()}${cp}`);
    });
  });
  afterAll(async () => {
    const code = await e.agent?.stop();
    // A webhook registration left on the shared API server refuses every later file's pods in
    // the syntax (nothing listens): the file that left it fails, not an innocent later one.
    // (This hook runs after the file's own: vitest runs after-hooks last-registered first.)
    const left = e.cp ? undefined : await e.kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: 'ownerrefs.dev' }).catch(() => undefined);
    if (left) await e.kc.makeApiClient(AdmissionregistrationV1Api).deleteMutatingWebhookConfiguration({ name: 'ownerrefs.dev' });
    // Before the emulator stops: it finishes the pods' graceful deletion (shared node).
    if (!e.cp) await ns?.cleanup();
    await node?.stop();
    await e.proxy?.close();
    await privateCp?.stop();
    if (code !== undefined && code !== 0) throw new Error(`agent exited ${code} on SIGTERM\n${await e.diagnostics()}`);
    if (left) throw new Error('this file left the MutatingWebhookConfiguration ownerrefs.dev on the shared API server: end its webhook with WebhookProcess.remove()');
  });
  return e;
}

/** Items of a KEP document. */
export function items(text: string): { kind: string; name: string; uid: string }[] {
  return (JSON.parse(text) as { items: { kind: string; name: string; uid: string }[] }).items;
}
