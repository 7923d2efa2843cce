// The reconnect storm, for bench:fleet: the API server restarted with every agent connected.
// Per second from the restart: the requests the agents made (their own
// ownerrefs_api_requests_total, which counts refused connections during the outage too),
// those of them the API server answered, and, once it is back, what it dispatched for the
// kubelets and for the agents (its own counters, which start from zero). Done when the
// restarted server holds as many pod and Node watches as before (kubelets' and agents').

import type { AgentProcess } from '../../../localcluster/agentproc.ts';
import type { ControlPlane } from '../../../localcluster/controlplane/controlplane.ts';
import { agentRequests, apiServer, kubeletRequests } from './apiserver.ts';

export interface Storm {
  agents: number;
  apiserverRestartSeconds: number | undefined;
  podAndNodeWatchesBefore: number;
  everyWatchBackAfterSeconds: number | undefined;
  /** Index i: the second [i, i+1) after the restart began. */
  agentRequestsPerSecond: number[];
  agentAnsweredRequestsPerSecond: number[];
  /** From the restarted API server's counters; null while it was down. */
  serverCountedPerSecond: { kubelets: number | null; agents: number | null }[];
  agentRequestsPeakPerSecond: number;
  agentAnsweredRequestsPeakPerSecond: number;
  /** The answered peak divided by the number of agents: the issue's "per agent per second". */
  answeredPeakPerAgent: number;
  agentRequestsTotal: number;
  agentRelists: number;
  kubeletRequestsInWindow: number;
  agentRequestsServerCounted: number;
}

const LIMIT_S = 120;

export async function reconnectStorm(cp: ControlPlane, agents: AgentProcess[]): Promise<Storm> {
  const total = async (name: string, labels = '') => (await Promise.all(agents.map((a) => a.metric(name, labels).catch(() => 0)))).reduce((x, y) => x + y, 0);
  const errors = () => total('ownerrefs_api_requests_total', 'code="error"');
  const before = { requests: await total('ownerrefs_api_requests_total'), relists: await total('ownerrefs_relists_total'), api: await apiServer(cp) };
  const s0 = performance.now();
  let restartedAt: number | undefined;
  const restart = cp.restartApiserver().then(() => { restartedAt = (performance.now() - s0) / 1000; });
  const perSecond: number[] = [];
  const answered: number[] = [];
  const server: { kubelets: number | null; agents: number | null }[] = [];
  let last = before.requests;
  let lastErrors = await errors();
  let lastServer = { kubelets: 0, agents: 0 };
  let allBackAt: number | undefined;
  for (let s = 0; s < LIMIT_S && allBackAt === undefined; s++) {
    await new Promise((r) => setTimeout(r, Math.max(0, s0 + (s + 1) * 1000 - performance.now())));
    const now = await total('ownerrefs_api_requests_total');
    const nowErrors = await errors();
    perSecond.push(now - last);
    answered.push(now - last - (nowErrors - lastErrors));
    last = now;
    lastErrors = nowErrors;
    const api = restartedAt === undefined ? undefined : await apiServer(cp).catch(() => undefined);
    if (api) {
      const k = kubeletRequests(api);
      const a = agentRequests(api);
      server.push({ kubelets: k - lastServer.kubelets, agents: a - lastServer.agents });
      lastServer = { kubelets: k, agents: a };
      if (api.podAndNodeWatches >= before.api.podAndNodeWatches) allBackAt = (performance.now() - s0) / 1000;
    } else {
      server.push({ kubelets: null, agents: null });
    }
  }
  await restart;
  const after = await apiServer(cp);
  const peakAnswered = Math.max(...answered);
  return {
    agents: agents.length,
    apiserverRestartSeconds: restartedAt,
    podAndNodeWatchesBefore: before.api.podAndNodeWatches,
    everyWatchBackAfterSeconds: allBackAt,
    agentRequestsPerSecond: perSecond,
    agentAnsweredRequestsPerSecond: answered,
    serverCountedPerSecond: server,
    agentRequestsPeakPerSecond: Math.max(...perSecond),
    agentAnsweredRequestsPeakPerSecond: peakAnswered,
    answeredPeakPerAgent: peakAnswered / agents.length,
    agentRequestsTotal: last - before.requests,
    agentRelists: (await total('ownerrefs_relists_total')) - before.relists,
    kubeletRequestsInWindow: kubeletRequests(after), // a restarted API server counts from zero
    agentRequestsServerCounted: agentRequests(after),
  };
}

export function describeStorm(s: Storm): string {
  return `reconnect storm: API server back in ${s.apiserverRestartSeconds?.toFixed(1)} s; all ${s.podAndNodeWatchesBefore} pod and Node watches back after ` +
    `${s.everyWatchBackAfterSeconds?.toFixed(1) ?? `NOT within ${LIMIT_S}`} s; agent requests peak ${s.agentRequestsPeakPerSecond}/s ` +
    `(answered by the API server: peak ${s.agentAnsweredRequestsPeakPerSecond}/s, ${s.answeredPeakPerAgent.toFixed(2)} per agent), total ${s.agentRequestsTotal} ` +
    `(${s.agents} agents), relists ${s.agentRelists}; kubelets' requests since the restart ${s.kubeletRequestsInWindow}`;
}
