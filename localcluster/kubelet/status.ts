// The pod status a kubelet reports for a started pod, as the emulator fakes it.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { TEST_NODE_IP } from '../controlplane/node.ts';

// Stable, distinct-enough pod IPs in 10.244.0.0/16 without any allocator state.
function podIP(uid: string): string {
  const h = createHash('sha256').update(uid).digest();
  return `10.244.${h[0]! % 255}.${(h[1]! % 253) + 2}`;
}

export function isRunningReady(pod: V1Pod): boolean {
  return pod.status?.phase === 'Running' &&
    (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export function runningStatus(pod: V1Pod): object {
  const now = new Date().toISOString();
  const ip = podIP(pod.metadata!.uid!);
  const cond = (type: string) => ({ type, status: 'True', lastTransitionTime: now, lastProbeTime: null });
  const running = (c: { name: string; image?: string }) => ({
    name: c.name,
    image: c.image ?? '',
    imageID: `emulated://${c.image ?? ''}`,
    containerID: `emulated://${pod.metadata!.uid}/${c.name}`,
    ready: true,
    started: true,
    restartCount: 0,
    state: { running: { startedAt: now } },
  });
  const terminated = (c: { name: string; image?: string }) => ({
    ...running(c),
    ready: false,
    started: false,
    state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } },
  });
  return {
    status: {
      phase: 'Running',
      hostIP: TEST_NODE_IP,
      hostIPs: [{ ip: TEST_NODE_IP }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: pod.status?.startTime ?? now,
      conditions: ['PodReadyToStartContainers', 'Initialized', 'ContainersReady', 'Ready', 'PodScheduled'].map(cond),
      containerStatuses: (pod.spec?.containers ?? []).map(running),
      initContainerStatuses: (pod.spec?.initContainers ?? []).map(terminated),
    },
  };
}
