// The product running on this machine without a cluster: the local control plane
// (built from Go modules, cached), a node, and the agent as a real process with the RBAC
// from daemonset.yaml. The node is a real one (the kubelet with containerd and runc,
// localcluster/node) when asked for and the machine can run it, else the kubelet
// emulator on a temporary kubelet root. Used by `npm run demo` (real node) and
// `npm run soak` (the emulator: it churns pods faster than containers start).

import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { controlPlaneBinaries, reapLeftoverControlPlanes, type ControlPlane } from '../localcluster/controlplane/controlplane.ts';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from '../localcluster/agentproc.ts';
import { startEmulatorNode, startLocalControlPlane, startRealOrHollowNode } from '../localcluster/clusters.ts';
import type { KubeletEmulator } from '../localcluster/kubelet/emulator.ts';
import { missingForRealNode, type RealNode } from '../localcluster/node/realnode.ts';
import { waitFor } from '../localcluster/wait.ts';


export interface LocalCluster {
  cp: ControlPlane;
  kc: KubeConfig;
  core: CoreV1Api;
  /** Set when the node is the emulator. */
  kubelet?: KubeletEmulator;
  /** Set when the node is a real one. */
  realNode?: RealNode;
  agent: AgentProcess;
  kubeletRoot: string;
  stop(): Promise<void>;
}

export async function startLocalCluster(opts: {
  node: string; agentArgs?: string[]; say?: (msg: string) => void;
  /** Run this entry point (e.g. the compiled agent, as the image does) instead of agent/main.ts. */
  agentMain?: string; agentEnv?: Record<string, string>; agentNodeFlags?: string[];
  /** A real kubelet with containerd and runc, if this machine can run one. */
  realNode?: boolean;
}): Promise<LocalCluster> {
  const say = opts.say ?? (() => {});
  const missing = opts.realNode ? missingForRealNode() : [];
  if (missing.length > 0) say(`NOTE: no real node here (this machine lacks ${missing.join(', ')}); using the kubelet emulator instead`);
  const real = opts.realNode === true && missing.length === 0;
  say('building or locating etcd, kube-apiserver, kube-controller-manager, kube-scheduler (first run: ~5 min)');
  const binDir = await controlPlaneBinaries();
  await reapLeftoverControlPlanes();
  // The real node's control plane runs node lifecycle; the emulator's registers its Node.
  const lcp = await startLocalControlPlane({ binDir, ...(real ? { realNodes: true } : { nodeName: opts.node }) });
  const { cp, kc, core } = lcp;
  const stops: (() => Promise<unknown>)[] = [() => lcp.stop()];
  const stop = async () => { for (const s of stops) await s().catch(() => undefined); };
  try {
    let kubelet: KubeletEmulator | undefined;
    let realNode: RealNode | undefined;
    let kubeletRoot: string;
    if (real) {
      say(`control plane up at ${cp.server}; logs in ${cp.logsDir}; building or locating the kubelet and the node's images (first run: ~4 min)`);
      realNode = await startRealOrHollowNode({ cp, name: opts.node, hollow: false });
      stops.unshift(() => realNode!.stop());
      kubeletRoot = realNode.kubeletRoot;
      say(`node ${opts.node} Ready: the real kubelet with containerd and runc, root ${kubeletRoot}`);
    } else {
      say(`control plane up at ${cp.server}; node ${opts.node} registered; logs in ${cp.logsDir}`);
      // The emulator, also where a real node was asked for and cannot run (not a hollow
      // node, as the real-node tests use): the demo then reads its file through kubelet.volumeDir.
      const node = await startEmulatorNode({ kc, name: opts.node });
      stops.unshift(() => node.stop());
      kubelet = node.kubelet;
      kubeletRoot = node.kubeletRoot;
    }
    const agent = await startAgentProcess({
      kubeconfig: await agentKubeconfig(kc, kubeletRoot, { nodeName: opts.node }), nodeName: opts.node, kubeletRoot, args: opts.agentArgs ?? ['--log-level=info'], main: opts.agentMain, env: opts.agentEnv, extraNodeFlags: opts.agentNodeFlags,
    });
    stops.unshift(() => agent.stop());
    await waitFor(async () => (await agent.get('/readyz')).status === 200, { describe: 'agent ready' });
    say(`agent running with the ServiceAccount and ClusterRole from daemonset.yaml; /metrics on 127.0.0.1:${agent.healthPort}`);
    return { cp, kc, core, ...(kubelet ? { kubelet } : {}), ...(realNode ? { realNode } : {}), agent, kubeletRoot, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
