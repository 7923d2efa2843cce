// Fault injection on the API side (issue: never stale, never blank). Each test keeps a
// reader loop on every projected file throughout and asserts that no file was ever
// missing, empty or torn, that the files converge once the fault ends, and that the
// agent's request count stays bounded (no reconnect storm).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBurst, type Burst } from '../support/burst.ts';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { startHeartbeat, type Heartbeat } from '../support/heartbeat.ts';
import { startReader } from '../support/reader.ts';

// Short, so that a black-holed watch is replaced within seconds; the heartbeat keeps the
// healthy watches from going this quiet (production: 90 s bound, a bookmark a minute).
const STALL_SECONDS = 5;
const HEARTBEAT_MS = 500;

describe('API faults', () => {
  // A private control plane (we kill and compact it) and a proxy (we black-hole it).
  const e = useE2E('faults', { privateControlPlane: 'faults-node', proxy: true, agentArgs: [`--stall-seconds=${STALL_SECONDS}`, '--ready-down-seconds=1'] });
  let burst: Burst;
  let generation = 0;
  let heartbeat: Heartbeat;
  beforeAll(async () => {
    heartbeat = await startHeartbeat(e.core, { namespace: e.ns, nodeName: e.nodeName, everyMs: HEARTBEAT_MS });
  });
  afterAll(async () => heartbeat?.stop());

  const converge = (i: number, what: string) => waitFor(() => burst.behind(i).length === 0,
    { timeoutMs: 60_000, describe: `every file names owner ${i} (${what})`, logsDir: e.cp!.logsDir });
  // Both of the agent's watches (pods and the Node) open through the proxy.
  const connected = () => waitFor(() => e.proxy!.open >= 2, { describe: 'agent watches connected', logsDir: e.cp!.logsDir });
  const requests = () => e.agent.metric('ownerrefs_api_requests_total');

  async function withReader(body: () => Promise<void>): Promise<void> {
    burst ??= await startBurst(e, { pods: 12, owners: 12 });
    await converge(generation, 'before the fault');
    const reader = await startReader(burst.allowed());
    try {
      await body();
    } finally {
      const stats = await reader.stop();
      expect(stats.reads).toBeGreaterThan(0);
      expect(stats, stats.samples.join('\n')).toMatchObject({ missing: 0, torn: 0 });
    }
  }

  it('rides out kube-apiserver being killed and restarted in the middle of a burst', async () => {
    await withReader(async () => {
      const before = { requests: await requests(), connections: e.proxy!.connections };
      await burst.setOwner(++generation);
      const inflight = burst.setOwner(++generation); // retried by the test while the server is down
      await e.cp!.killApiserver();
      // Not ready once the pod watch has been down past its bound, but alive throughout:
      // a restart would not bring the API server back.
      await waitFor(async () => (await e.agent.get('/readyz')).status === 503, { describe: '/readyz fails during the outage', logsDir: e.cp!.logsDir });
      expect((await e.agent.get('/healthz')).status).toBe(200);
      await new Promise((r) => setTimeout(r, 2_000)); // the agent backs off meanwhile
      await e.cp!.startApiserver();
      await inflight;
      await burst.setOwner(++generation);
      await converge(generation, 'after the restart');
      await waitFor(async () => (await e.agent.get('/readyz')).status === 200, { describe: '/readyz recovers', logsDir: e.cp!.logsDir });
      const made = (await requests()) - before.requests;
      // 2 watches reconnecting with 0.8 s-doubling backoff over ~3 s of outage, plus relists:
      // tens at most; a storm would be hundreds.
      expect(made).toBeLessThan(40);
      expect(e.proxy!.connections - before.connections).toBeLessThan(40);
    });
  });

  it('relists after 410 Gone when its resourceVersion was compacted away, and picks up what it missed', async () => {
    await withReader(async () => {
      const relists = () => e.agent.metric('ownerrefs_relists_total', 'resource="pods",reason="expired"');
      const before = await relists();
      // The agent falls behind: nothing more reaches it (black hole), and it is frozen so
      // that its stall watchdog cannot reconnect before history is gone.
      await connected();
      e.proxy!.blackhole();
      process.kill(e.agent.child.pid!, 'SIGSTOP');
      try {
        await burst.setOwner(++generation);
        await burst.setOwner(++generation);
        await e.cp!.compact();
        await e.cp!.restartApiserver(); // a fresh watch cache: the agent's resourceVersion is now too old
      } finally {
        process.kill(e.agent.child.pid!, 'SIGCONT');
      }
      await converge(generation, 'after the relist');
      expect(await relists()).toBeGreaterThan(before);
      // This API server streams lists (WatchList, on by default since 1.34): the first state
      // and the relist were each one watch, never a list.
      expect(await e.agent.metric('ownerrefs_first_states_total', 'resource="pods",how="stream"')).toBeGreaterThanOrEqual(2);
      expect(await e.agent.metric('ownerrefs_first_states_total', 'resource="pods",how="list"')).toBe(0);
    });
  });

  it('replaces a black-holed watch within its stall bound and catches up', async () => {
    await withReader(async () => {
      const stalls = () => e.agent.metric('ownerrefs_watch_starts_total', 'resource="pods",reason="stall"');
      const before = await stalls();
      await connected();
      const frozen = e.proxy!.blackhole(); // open connections stop forwarding but stay open
      expect(frozen).toBeGreaterThanOrEqual(2);
      await burst.setOwner(++generation);
      await waitFor(async () => (await stalls()) > before,
        { timeoutMs: 60_000, describe: 'the pod watch is declared stalled and restarted', logsDir: e.cp!.logsDir });
      await converge(generation, 'after the black hole');
    });
  });

  // Before the test of a server holding every connection: that one leaves the handshake
  // deadline long, and the held connections here must be given up within the stall bound.
  it('behind a load balancer, gives up the connections sent to a server still starting and is served by its retry', async () => {
    await withReader(async () => {
      const before = { abandoned: e.proxy!.abandoned, timeouts: await e.agent.metric('ownerrefs_api_handshake_timeouts_total') };
      await connected();
      // Every watch breaks (one server went away) and the next two connections, the watches'
      // retries, land on a server that accepts and does not serve; later ones on one that
      // serves. Nothing is ever released: the files can only converge through the retries.
      e.proxy!.hold(2);
      expect(e.proxy!.cut()).toBeGreaterThanOrEqual(2);
      await burst.setOwner(++generation);
      await converge(generation, 'served by the retries, the held connections never answered');
      await waitFor(() => e.proxy!.abandoned >= before.abandoned + 2,
        { describe: 'the agent closed both held connections', logsDir: e.cp!.logsDir });
      expect(e.proxy!.held).toBe(0);
      // Only the two held connections can fail a handshake, so two timeouts say both were given
      // up at the deadline, not ended by the stall watchdog (5 s here, standing in for the 90 s
      // of production), which would end them too: with the deadline at 600 s this fails.
      expect(await e.agent.metric('ownerrefs_api_handshake_timeouts_total')).toBeGreaterThanOrEqual(before.timeouts + 2);
    });
  });

  it('gives up on connections a starting API server accepts but does not serve at its handshake deadline, and catches up once it serves', async () => {
    await withReader(async () => {
      const from = e.agent.lines.length;
      /** The watches (pods, Node) that gave up a connection at the handshake deadline since `from`. */
      const gaveUp = () => new Set(e.agent.lines.slice(from).filter((l) => l.msg === 'watch failed; retrying'
        && JSON.stringify(l).includes('did not finish a TLS handshake')).map((l) => l.resource)).size;
      const before = { abandoned: e.proxy!.abandoned };
      await connected();
      // What a kube-apiserver does between binding its port and serving it: connections are
      // accepted and nothing is answered. Then every watch breaks, as when the server went away.
      e.proxy!.hold();
      expect(e.proxy!.cut()).toBeGreaterThanOrEqual(2);
      await burst.setOwner(++generation); // while the agent cannot see it
      // Each watch's retry meets a held connection and gives it up at the handshake deadline
      // (1 s, then 2 s), not when the stall watchdog (5 s here) would: behind a load balancer
      // the retry may reach a server that serves.
      await waitFor(() => gaveUp() === 2 && e.proxy!.abandoned >= before.abandoned + 2,
        { timeoutMs: 60_000, describe: 'both watches give up a held connection at the handshake deadline', logsDir: e.cp!.logsDir });
      // Counted for an alert, once per connection given up.
      expect(await e.agent.metric('ownerrefs_api_handshake_timeouts_total')).toBeGreaterThanOrEqual(2);
      e.proxy!.release();
      await converge(generation, 'once the server serves');
    });
  });
});
