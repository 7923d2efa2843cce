// The product running on this machine without a cluster: the local control plane
// (built from Go modules, cached), the kubelet emulator on a temporary kubelet root,
// and the agent as a real process with the RBAC from daemonset.yaml. Used by
// `npm run demo` and `npm run soak`.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { controlPlaneBinaries, newWorkDir, reapLeftoverControlPlanes, startControlPlane, type ControlPlane } from '../localcluster/controlplane/controlplane.ts';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from '../localcluster/agentproc.ts';
import { startKubeletEmulator, type KubeletEmulator } from '../localcluster/kubelet/emulator.ts';
import { waitFor } from '../localcluster/wait.ts';


export interface LocalCluster {
  cp: ControlPlane;
  kc: KubeConfig;
  core: CoreV1Api;
  kubelet: KubeletEmulator;
  agent: AgentProcess;
  kubeletRoot: string;
  stop(): Promise<void>;
}

export async function startLocalCluster(opts: {
  node: string; agentArgs?: string[]; say?: (msg: string) => void;
  /** Run this entry point (e.g. the compiled agent, as the image does) instead of agent/main.ts. */
  agentMain?: string; agentEnv?: Record<string, string>; agentNodeFlags?: string[];
}): Promise<LocalCluster> {
  const say = opts.say ?? (() => {});
  say('building or locating etcd, kube-apiserver, kube-controller-manager, kube-scheduler (first run: ~5 min)');
  const binDir = await controlPlaneBinaries();
  await reapLeftoverControlPlanes();
  const cp = await startControlPlane({ binDir, workDir: await newWorkDir(), nodeName: opts.node });
  const kubeletRoot = mkdtempSync(path.join(os.tmpdir(), 'local-kubelet-'));
  const stops: (() => Promise<unknown>)[] = [() => cp.stop(), async () => rmSync(kubeletRoot, { recursive: true, force: true })];
  const stop = async () => { for (const s of stops) await s().catch(() => undefined); };
  try {
    say(`control plane up at ${cp.server}; node ${opts.node} registered; logs in ${cp.logsDir}`);
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const kubelet = await startKubeletEmulator({ kc, nodeName: opts.node, kubeletRoot });
    stops.unshift(() => kubelet.stop());
    const agent = await startAgentProcess({
      kubeconfig: await agentKubeconfig(kc, kubeletRoot), nodeName: opts.node, kubeletRoot, args: opts.agentArgs ?? ['--log-level=info'], main: opts.agentMain, env: opts.agentEnv, extraNodeFlags: opts.agentNodeFlags,
    });
    stops.unshift(() => agent.stop());
    await waitFor(async () => (await agent.get('/readyz')).status === 200, { describe: 'agent ready' });
    say(`agent running with the ServiceAccount and ClusterRole from daemonset.yaml; /metrics on 127.0.0.1:${agent.healthPort}`);
    return { cp, kc, core: kc.makeApiClient(CoreV1Api), kubelet, agent, kubeletRoot, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
