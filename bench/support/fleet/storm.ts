// The reconnect storm, for bench:fleet: the API server restarted with every agent connected.
// Two samplers run side by side from the restart, each on its own clock:
//   agents  once a second, one /metrics read per agent: ownerrefs_api_requests_total by
//           status code (which counts refused connections during the outage too, as
//           code="error"); rates are per actual interval, since reading 50 agents can
//           take longer than the second it describes;
//   server  once the API server is back, once a second: what it dispatched for the
//           kubelets and for the agents (its own counters, which start from zero) and its
//           open watches. Done when it holds as many pod and Node watches as before.

import type { AgentProcess } from '../../../localcluster/agentproc.ts';
import type { ControlPlane } from '../../../localcluster/controlplane/controlplane.ts';
import { agentRequests, apiServer, kubeletRequests } from './apiserver.ts';

/** One sampling interval: [from, to) in seconds since the restart began, and rates per second in it. */
export interface Interval { from: number; to: number; perSecond: number }
export interface Storm {
  agents: number;
  apiserverRestartSeconds: number | undefined;
  podAndNodeWatchesBefore: number;
  everyWatchBackAfterSeconds: number | undefined;
  /**
   * The agents' requests by when each ended (answered, or failed), and those the API server
   * answered (any HTTP status). A request the starting server held counts when it was
   * answered, not when it was sent. `agentRefused`: those that ended without an answer
   * (code "error"): during the outage, refused connections, which end as they are sent, so
   * they show when the agents sent; while the starting server holds connections, those the
   * agent gave up at its TLS handshake deadline (HANDSHAKE_DEADLINE), a second or two after.
   */
  agentAttempts: Interval[];
  agentAnswered: Interval[];
  agentRefused: Interval[];
  /** The agents' answered requests by status code, over the whole storm. */
  agentAnsweredByCode: Record<string, number>;
  /** From the restarted API server's counters, from its first sample on. */
  serverKubelets: Interval[];
  /**
   * What the restarted API server had dispatched by its first sample (it counts from its
   * start), and the TLS handshakes that had failed by then: connections given up by their
   * clients while it held them, each still handshaked once it served.
   */
  serverFirstSample: { at: number; kubelets: number; agents: number; tlsHandshakeErrors: number } | undefined;
  /** Failed TLS handshakes on the restarted server by the end of the storm (any client). */
  serverTlsHandshakeErrors: number | undefined;
  serverAgents: Interval[];
  /** Peaks, per agent (or, for the kubelets, per node) per second. */
  peakPerAgent: { attempts: number; answered: number; refused: number; serverCounted: number; kubeletsServerCountedPerNode: number };
  agentRequestsTotal: number;
  agentRelists: number;
  kubeletRequestsInWindow: number;
  agentRequestsServerCounted: number;
}

const LIMIT_S = 120;
const TICK_MS = 1_000;

async function byCode(agents: AgentProcess[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  await Promise.all(agents.map(async (a) => {
    const { body } = await a.get('/metrics').catch(() => ({ body: '' }));
    for (const l of body.split('\n').filter((x) => x.startsWith('ownerrefs_api_requests_total{'))) {
      const code = /code="([^"]*)"/.exec(l)?.[1] ?? '?';
      out[code] = (out[code] ?? 0) + Number(l.slice(l.lastIndexOf(' ') + 1));
    }
  }));
  return out;
}

const sum = (r: Record<string, number>, keep = (_c: string) => true) => Object.entries(r).filter(([c]) => keep(c)).reduce((n, [, v]) => n + v, 0);

export async function reconnectStorm(cp: ControlPlane, agents: AgentProcess[]): Promise<Storm> {
  const relists = async () => (await Promise.all(agents.map((a) => a.metric('ownerrefs_relists_total').catch(() => 0)))).reduce((x, y) => x + y, 0);
  const beforeApi = await apiServer(cp);
  const beforeCodes = await byCode(agents);
  const relists0 = await relists();
  const s0 = performance.now();
  const since = () => (performance.now() - s0) / 1000;
  let restartedAt: number | undefined;
  let allBackAt: number | undefined;
  const restart = cp.restartApiserver().then(() => { restartedAt = since(); });

  const agentTicks: { t: number; codes: Record<string, number> }[] = [{ t: 0, codes: beforeCodes }];
  const agentLoop = (async () => {
    for (let i = 1; allBackAt === undefined && since() < LIMIT_S; i++) {
      await new Promise((r) => setTimeout(r, Math.max(0, s0 + i * TICK_MS - performance.now())));
      const codes = await byCode(agents);
      agentTicks.push({ t: since(), codes });
    }
    // One more interval after the last watch came back: the tail of the storm.
    await new Promise((r) => setTimeout(r, TICK_MS));
    agentTicks.push({ t: since(), codes: await byCode(agents) });
  })();
  const serverTicks: { t: number; kubelets: number; agents: number; tls: number }[] = [];
  const serverLoop = (async () => {
    // The restarted server counts from zero, from a start the bench cannot see: its first
    // sample is the baseline (what came before it is reported on its own), not an interval.
    await restart;
    for (let i = Math.ceil(since()); allBackAt === undefined && since() < LIMIT_S; i++) {
      await new Promise((r) => setTimeout(r, Math.max(0, s0 + i * TICK_MS - performance.now())));
      const api = await apiServer(cp).catch(() => undefined);
      if (!api) continue;
      serverTicks.push({ t: since(), kubelets: kubeletRequests(api), agents: agentRequests(api), tls: api.tlsHandshakeErrors });
      if (api.podAndNodeWatches >= beforeApi.podAndNodeWatches) allBackAt = since();
    }
  })();
  await Promise.all([agentLoop, serverLoop]);
  const after = await apiServer(cp);

  const rates = <T extends { t: number }>(ticks: T[], value: (x: T) => number): Interval[] =>
    ticks.slice(1).map((x, i) => ({ from: round(ticks[i]!.t), to: round(x.t), perSecond: round((value(x) - value(ticks[i]!)) / (x.t - ticks[i]!.t)) }));
  const attempts = rates(agentTicks, (x) => sum(x.codes));
  const answered = rates(agentTicks, (x) => sum(x.codes, (c) => c !== 'error'));
  const refused = rates(agentTicks, (x) => x.codes.error ?? 0);
  const serverKubelets = rates(serverTicks, (x) => x.kubelets);
  const serverAgents = rates(serverTicks, (x) => x.agents);
  const peak = (xs: Interval[]) => Math.max(0, ...xs.map((x) => x.perSecond));
  const last = agentTicks.at(-1)!.codes;
  const answeredByCode: Record<string, number> = {};
  for (const c of Object.keys(last)) if (c !== 'error') answeredByCode[c] = (last[c] ?? 0) - (beforeCodes[c] ?? 0);
  return {
    agents: agents.length,
    apiserverRestartSeconds: restartedAt === undefined ? undefined : round(restartedAt),
    podAndNodeWatchesBefore: beforeApi.podAndNodeWatches,
    everyWatchBackAfterSeconds: allBackAt === undefined ? undefined : round(allBackAt),
    agentAttempts: attempts, agentAnswered: answered, agentRefused: refused, agentAnsweredByCode: answeredByCode,
    serverKubelets, serverAgents,
    serverFirstSample: serverTicks[0] ? { at: round(serverTicks[0].t), kubelets: serverTicks[0].kubelets, agents: serverTicks[0].agents, tlsHandshakeErrors: serverTicks[0].tls } : undefined,
    serverTlsHandshakeErrors: after.tlsHandshakeErrors,
    peakPerAgent: {
      attempts: round(peak(attempts) / agents.length), answered: round(peak(answered) / agents.length), refused: round(peak(refused) / agents.length),
      serverCounted: round(peak(serverAgents) / agents.length), kubeletsServerCountedPerNode: round(peak(serverKubelets) / agents.length),
    },
    agentRequestsTotal: sum(last) - sum(beforeCodes),
    agentRelists: (await relists()) - relists0,
    kubeletRequestsInWindow: kubeletRequests(after),
    agentRequestsServerCounted: agentRequests(after),
  };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

export function describeStorm(s: Storm): string {
  return `reconnect storm: API server back in ${s.apiserverRestartSeconds?.toFixed(1)} s; all ${s.podAndNodeWatchesBefore} pod and Node watches back after ` +
    `${s.everyWatchBackAfterSeconds?.toFixed(1) ?? `NOT within ${LIMIT_S}`} s; peak per agent per second: ended (answered or refused) ${s.peakPerAgent.attempts}, ` +
    `answered ${s.peakPerAgent.answered} (held requests count when answered), unanswered (refused, or given up at the handshake deadline) ${s.peakPerAgent.refused}, ` +
    `counted by the API server from its first sample ${s.peakPerAgent.serverCounted} (kubelets, per node: ${s.peakPerAgent.kubeletsServerCountedPerNode}); ` +
    `agent requests ${s.agentRequestsTotal} in all (${s.agents} agents; answered by code ${JSON.stringify(s.agentAnsweredByCode)}), relists ${s.agentRelists}; ` +
    `failed TLS handshakes on the restarted server ${s.serverFirstSample?.tlsHandshakeErrors ?? '?'} by its first sample, ${s.serverTlsHandshakeErrors ?? '?'} in all; ` +
    `kubelets' requests since the restart ${s.kubeletRequestsInWindow}`;
}
