// Traffic on the agent's two watches, for tests that shorten --stall-seconds.
//
// In production a connected watch is never silent for the stall bound: the API server
// sends a bookmark about once a minute and the bound is 90 s. A test that cuts the bound
// to a few seconds (to see a black-holed connection replaced quickly) must also cut the
// silence, or every quiet watch is declared stalled over and over and sits in backoff,
// and the test measures that instead of the fault it injects. This touches the Node and
// one pod on it (not opted in, so nothing is written for it) every `everyMs`.

import type { CoreV1Api } from '@kubernetes/client-node';
import { mergePatch } from '../../localcluster/patch.ts';

export interface Heartbeat {
  stop(): Promise<void>;
}

export async function startHeartbeat(core: CoreV1Api, opts: { namespace: string; nodeName: string; everyMs?: number }): Promise<Heartbeat> {
  const pod = await core.createNamespacedPod({ namespace: opts.namespace, body: {
    metadata: { name: 'heartbeat' },
    spec: { nodeName: opts.nodeName, terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'busybox' }] },
  } });
  let beat = 0;
  let stopped = false;
  const touch = (annotations: Record<string, string>) => Promise.allSettled([ // the API server may be down: skip a beat
    core.patchNode({ name: opts.nodeName, body: { metadata: { annotations } } }, mergePatch),
    core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: opts.namespace, body: { metadata: { annotations } } }, mergePatch),
  ]);
  const loop = (async () => {
    while (!stopped) {
      await touch({ 'ownerrefs.dev/test-heartbeat': String(++beat) });
      await new Promise((r) => setTimeout(r, opts.everyMs ?? 1_000));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
