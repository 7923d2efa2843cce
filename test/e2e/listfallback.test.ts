// An API server without the WatchList feature (as 1.33 is by default): it refuses a watch
// with sendInitialEvents=true as invalid, and the agent reads its first state with a
// list instead, once told, then serves its pods as on any cluster. The streamed first
// state on a server with the feature is held by the other end-to-end tests (the metric
// check at the end of faults-api.test.ts) and by reflector.test.ts.
import { describe, expect, it } from 'vitest';
import { startBurst } from '../support/burst.ts';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';

describe('a server that does not stream lists', () => {
  const e = useE2E('nostream', { privateControlPlane: 'nostream-node', apiserverFeatureGates: 'WatchList=false' });

  it('is listed from instead: the pods are served and follow owner changes, and the agent says why once per watch', async () => {
    const burst = await startBurst(e, { pods: 6, owners: 6 });
    const converge = (i: number) => waitFor(() => burst.behind(i).length === 0,
      { timeoutMs: 60_000, describe: `every file names owner ${i}`, logsDir: e.cp!.logsDir });
    await converge(0);
    await burst.setOwner(1);
    await converge(1);
    for (const resource of ['pods', 'nodes']) {
      expect(await e.agent.metric('ownerrefs_first_states_total', `resource="${resource}",how="list"`), resource).toBe(1);
      expect(await e.agent.metric('ownerrefs_first_states_total', `resource="${resource}",how="stream"`), resource).toBe(0);
      // The refused stream and the listed watch after it are one start.
      expect(await e.agent.metric('ownerrefs_watch_starts_total', `resource="${resource}",reason="initial"`), resource).toBe(1);
    }
    const refused = e.agent.lines.filter((l) => String(l.msg).includes('does not stream lists'));
    expect(refused.map((l) => l.resource).sort()).toEqual(['nodes', 'pods']);
    expect(e.agent.lines.filter((l) => String(l.msg).startsWith('watch failed'))).toEqual([]); // a refusal is not a failure: no backoff
  });
});
