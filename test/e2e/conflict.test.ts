// A write of the agent's that meets a 409 costs one more round trip, not a backoff: against
// the real API server, a slow webhook holds the agent's PATCH while another writer changes
// the pod, so the PATCH's resourceVersion precondition fails at storage. The latency from an
// ownership change to the annotation is logged for conflicting and plain writes, side by
// side, in interleaved pairs (not asserted: this machine decides timings). The case where no
// watch event comes, and one GET gives the newer version, is test/agent/annotations/keeper.test.ts's.

import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { mergePatch } from '../../localcluster/patch.ts';
import { startTestWebhook } from '../../localcluster/testwebhook.ts';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';

const OURS = 'ownerrefs.dev/owner-references';
const AGENT = 'system:serviceaccount:ownerrefs-system:ownerrefs-agent';
const SLOW_MS = 300;

describe('a conflicting annotation write', () => {
  const e = useE2E('conflict');

  it('runs again from the newer version the watch brings: an ownership change whose PATCH met a 409 reaches the annotation a few slow writes later, not after a backoff', { timeout: 180_000 }, async () => {
    const conflictsBefore = await e.agent.metric('ownerrefs_annotation_writes_total', 'result="conflict"');
    const owners = await Promise.all(Array.from({ length: 10 }, async (_, i) => (await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: `owner-${i}` } } })).metadata!));
    await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'reader' },
      spec: { nodeName: e.nodeName, containers: [{ name: 'c', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${OURS}']` } } }] }] } } });
    const annotation = async () => (await e.core.readNamespacedPod({ name: 'reader', namespace: e.ns })).metadata?.annotations?.[OURS];
    await waitFor(async () => (await annotation()) !== undefined || undefined, { describe: 'the agent\'s first value' });
    const slow = await startTestWebhook(e.kc, { name: 'slow', namespace: e.ns, operations: ['UPDATE'], mutate: () => [], keepRequests: false,
      delayMs: (r) => (r.userInfo.username === AGENT ? SLOW_MS : 0) });
    try {
      /** Sets owner `i`; with `conflict`, another writer changes the pod while the agent's PATCH is held. Returns ms until the annotation names it. */
      const change = async (i: number, conflict: boolean) => {
        const started = performance.now();
        await e.core.patchNamespacedPod({ name: 'reader', namespace: e.ns, body: { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owners[i]!.name!, uid: owners[i]!.uid! }] } } }, mergePatch);
        if (conflict) {
          await sleep(SLOW_MS / 2);
          await e.core.patchNamespacedPod({ name: 'reader', namespace: e.ns, body: { metadata: { labels: { bumped: String(i) } } } }, mergePatch);
        }
        for (;;) {
          if ((await annotation())?.includes(owners[i]!.uid!)) return performance.now() - started;
          await sleep(10);
        }
      };
      const pairs: [number, number][] = [];
      for (let i = 0; i < 5; i++) pairs.push([await change(2 * i, true), await change(2 * i + 1, false)]);
      expect(await e.agent.metric('ownerrefs_annotation_writes_total', 'result="conflict"')).toBeGreaterThanOrEqual(conflictsBefore + 5);
      const ms = (xs: number[]) => [...xs].sort((a, b) => a - b).map((x) => x.toFixed(0));
      const added = ms(pairs.map(([c, p]) => c - p));
      console.log(`ownership change to annotation, behind a ${SLOW_MS} ms webhook: conflicting ${ms(pairs.map(([c]) => c)).join(', ')} ms; plain ${ms(pairs.map(([, p]) => p)).join(', ')} ms; ` +
        `a conflict added: median ${added[2]} ms, ${added[0]} to ${added[4]} ms (5 pairs)`);
    } finally {
      await slow.remove();
    }
  });
});
