// Per-file e2e fixture: a kubelet emulator on a fresh kubelet root, and the real
// agent process running with the RBAC shipped in daemonset.yaml.

import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1DaemonSet, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from './agentproc.ts';
import { clusterInfo, kubeConfig, newNamespace, waitFor, type TestNamespace } from './cluster.ts';
import { startKubeletEmulator, type KubeletEmulator } from './kubelet.ts';

export interface E2E {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  ns: string;
  kubelet: KubeletEmulator;
  agent: AgentProcess;
  nodeName: string;
  /** Content of a projected file of a pod, or undefined while it is absent. */
  file(pod: V1Pod, name?: string, volume?: string): string | undefined;
  /** Waits until the pod's file satisfies `ok`; fails with agent logs otherwise. */
  waitForFile(pod: V1Pod, ok: (text: string) => boolean, describe: string, name?: string): Promise<string>;
  diagnostics(): Promise<string>;
}

/** Registers beforeAll/afterAll hooks; the returned object is filled in before tests run. */
export function useE2E(prefix: string, agentArgs: string[] = []): E2E {
  const e = {} as E2E;
  let ns: TestNamespace;
  beforeAll(async () => {
    const info = clusterInfo();
    e.kc = kubeConfig();
    e.core = e.kc.makeApiClient(CoreV1Api);
    e.apps = e.kc.makeApiClient(AppsV1Api);
    e.nodeName = info.nodeName;
    ns = await newNamespace(prefix, e.kc);
    e.ns = ns.name;
    const root = mkdtempSync(path.join(os.tmpdir(), 'kubelet-'));
    e.kubelet = await startKubeletEmulator({ kc: e.kc, nodeName: info.nodeName, kubeletRoot: root });
    e.agent = await startAgentProcess({
      kubeconfig: await agentKubeconfig(e.kc, root), nodeName: info.nodeName, kubeletRoot: root, args: agentArgs,
    });
    e.diagnostics = async () => {
      const pods = await e.core.listNamespacedPod({ namespace: e.ns }).then((l) => l.items.map((p) =>
        `${p.metadata!.name} uid=${p.metadata!.uid} labels=${JSON.stringify(p.metadata!.labels)} owners=${JSON.stringify(p.metadata!.ownerReferences?.map((o) => o.name))}` +
        ` deleting=${p.metadata!.deletionTimestamp !== undefined} phase=${p.status?.phase}`).join('\n'), (err: unknown) => String(err));
      return `--- pods in ${e.ns} ---\n${pods}\n--- agent log (tail) ---\n${e.agent.logs().slice(-6000)}\n` +
        `--- kubelet emulator errors ---\n${e.kubelet.errors.slice(-10).join('\n')}`;
    };
    e.file = (pod, name = 'ownerReferences', volume = 'podinfo') => {
      const p = path.join(e.kubelet.volumeDir(pod.metadata!.uid!, volume), name);
      return existsSync(p) ? readFileSync(p, 'utf8') : undefined;
    };
    e.waitForFile = (pod, ok, describe, name) =>
      waitFor(() => { const t = e.file(pod, name); return t !== undefined && ok(t) ? t : undefined; },
        { timeoutMs: 60_000, describe: `${pod.metadata!.name}: ${describe}`, diagnostics: e.diagnostics });
    await waitFor(async () => (await e.agent.get('/readyz')).status === 200, { describe: 'agent ready', diagnostics: e.diagnostics });
  });
  afterAll(async () => {
    const code = await e.agent?.stop();
    await e.kubelet?.stop();
    await ns?.cleanup();
    if (code !== undefined && code !== 0) throw new Error(`agent exited ${code} on SIGTERM\n${e.diagnostics()}`);
  });
  return e;
}

/** A DaemonSet whose pods opt in with an emptyDir "podinfo". */
export function podinfoDaemonSet(name: string, labels: Record<string, string> = { app: name }): V1DaemonSet {
  return {
    metadata: { name },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: { 'ownerrefs.dev/volume': 'podinfo' } },
        spec: {
          tolerations: [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 0,
          containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }] }],
          volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
        },
      },
    },
  };
}

/** Items of a KEP document. */
export function items(text: string): { kind: string; name: string; uid: string }[] {
  return (JSON.parse(text) as { items: { kind: string; name: string; uid: string }[] }).items;
}
