// A write of the agent's that meets a 409 is sent again at once from the newer version, not
// after a backoff: against the real API server, a slow webhook holds the agent's PATCH while
// another writer changes the pod, so the PATCH's resourceVersion precondition fails at
// storage. The latency from an ownership change to the annotation is logged for conflicting
// and plain writes, side by side, in interleaved pairs (bench/support/conflict.ts; not
// asserted: this machine decides timings, and bench/conflict.ts publishes them). The case
// where no watch event comes, and one GET gives the newer version, is
// test/agent/annotations/keeper.test.ts's.

import { describe, expect, it } from 'vitest';
import { AGENT_USER, conflictPairs, readerPod } from '../../bench/support/conflict.ts';
import { ANNOTATIONS } from '../../projections/names.ts';
import { startTestWebhook } from '../../localcluster/testwebhook.ts';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';

const SLOW_MS = 300;

describe('a conflicting annotation write', () => {
  const e = useE2E('conflict');

  it('runs again from the newer version the watch brings: an ownership change whose PATCH met a 409 reaches the annotation a few slow writes later, not after a backoff', { timeout: 180_000 }, async () => {
    const conflictsBefore = await e.agent.metric('ownerrefs_annotation_writes_total', 'result="conflict"');
    const owners = await Promise.all(Array.from({ length: 10 }, async (_, i) => (await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: `owner-${i}` } } })).metadata!));
    await e.core.createNamespacedPod({ namespace: e.ns, body: readerPod('reader', e.nodeName) });
    await waitFor(async () => (await e.core.readNamespacedPod({ name: 'reader', namespace: e.ns })).metadata?.annotations?.[ANNOTATIONS.ownerReferences], { describe: 'the agent\'s first value' });
    const slow = await startTestWebhook(e.kc, { name: 'slow', namespace: e.ns, operations: ['UPDATE'], mutate: () => [], keepRequests: false,
      delayMs: (r) => (r.userInfo.username === AGENT_USER ? SLOW_MS : 0) });
    try {
      const pairs = await conflictPairs(e.core, { namespace: e.ns, name: 'reader', pairs: 5, slowMs: SLOW_MS, owners: owners.map((m) => ({ name: m.name!, uid: m.uid! })) });
      expect(await e.agent.metric('ownerrefs_annotation_writes_total', 'result="conflict"')).toBeGreaterThanOrEqual(conflictsBefore + 5);
      const ms = (xs: number[]) => [...xs].sort((a, b) => a - b).map((x) => x.toFixed(0));
      const added = ms(pairs.map((p) => p.conflicting - p.plain));
      console.log(`ownership change to annotation, behind a ${SLOW_MS} ms webhook: conflicting ${ms(pairs.map((p) => p.conflicting)).join(', ')} ms; plain ${ms(pairs.map((p) => p.plain)).join(', ')} ms; ` +
        `a conflict added: median ${added[2]} ms, ${added[0]} to ${added[4]} ms (5 pairs)`);
    } finally {
      await slow.remove();
    }
  });
});
