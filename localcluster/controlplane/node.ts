// Registers a fake Node that the scheduler and the DaemonSet controller treat
// as a healthy, schedulable member of the cluster.
import {
  CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Node,
} from '@kubernetes/client-node';

export const TEST_NODE_IP = '10.240.0.10';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function isConflictOrExists(err: unknown): boolean {
  const code = (err as { code?: number }).code;
  return code === 409;
}

export async function createTestNode(kc: KubeConfig, name: string): Promise<V1Node> {
  const core = kc.makeApiClient(CoreV1Api);
  const body: V1Node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'ownerrefs.dev/agent': 'true',
      },
    },
  };
  try {
    await core.createNode({ body });
  } catch (err) {
    // Re-registering an existing node is fine: the patches below reset it.
    if (!isConflictOrExists(err)) throw err;
  }

  const now = new Date().toISOString();
  const resources = { cpu: '8', memory: '32Gi', pods: '250', 'ephemeral-storage': '100Gi' };
  const condition = (type: string, status: string, reason: string) =>
    ({ type, status, reason, message: reason, lastHeartbeatTime: now, lastTransitionTime: now });
  // Nothing ever updates this status again: with no node-lifecycle controller
  // running, no one notices the missing heartbeats, so one write keeps it Ready.
  await core.patchNodeStatus({
    name,
    body: {
      status: {
        capacity: resources,
        allocatable: resources,
        conditions: [
          condition('Ready', 'True', 'KubeletReady'),
          condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory'),
          condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure'),
          condition('PIDPressure', 'False', 'KubeletHasSufficientPID'),
        ],
        addresses: [
          { type: 'InternalIP', address: TEST_NODE_IP },
          { type: 'Hostname', address: name },
        ],
        nodeInfo: {
          architecture: 'amd64', operatingSystem: 'linux', osImage: 'ownerrefs kubelet emulator',
          kernelVersion: '', containerRuntimeVersion: 'emulated://1', kubeletVersion: 'v1.36.3',
          kubeProxyVersion: '', machineID: name, systemUUID: name, bootID: name,
        },
      },
    },
  }, mergePatch);

  // The TaintNodesByCondition admission plugin tainted the node not-ready at
  // creation; normally the node-lifecycle controller lifts it once the kubelet
  // reports Ready. Lift it ourselves, keeping any other taints.
  const node = await core.readNode({ name });
  const taints = (node.spec?.taints ?? []).filter((t) => t.key !== 'node.kubernetes.io/not-ready');
  if (taints.length !== (node.spec?.taints ?? []).length) {
    await core.patchNode({
      name,
      body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints } },
    }, mergePatch);
  }
  return core.readNode({ name });
}
