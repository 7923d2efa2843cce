// The API server's own numbers, for bench:fleet: its CPU seconds and RSS (from /proc), its
// open watches (apiserver_longrunning_requests) and the requests it dispatched per
// FlowSchema (apiserver_flowcontrol_dispatched_requests_total), which tells kubelets'
// requests from the agents' (the agents have a FlowSchema of their own, bench/support/cluster.ts).

import path from 'node:path';
import type { ControlPlane } from '../../../localcluster/controlplane/controlplane.ts';
import { httpCall } from '../../../localcluster/controlplane/net.ts';
import { AGENT_FLOW_SCHEMA } from '../cluster.ts';
import { sample } from '../proc.ts';

/** The suggested FlowSchemas that match kubelets (group system:nodes): leases and node status, and the rest. */
export const KUBELET_FLOW_SCHEMAS = ['system-node-high', 'system-nodes'];

export interface ApiServerSample {
  cpuS: number;
  rssMiB: number;
  watches: number;
  podAndNodeWatches: number;
  /** Go's heap and stacks in use (go_memstats_heap_inuse_bytes + stack_inuse), MiB: less noisy than RSS. */
  goInUseMiB: number;
  goroutines: number;
  /** Requests dispatched since the API server started, by FlowSchema. */
  dispatched: Record<string, number>;
  /**
   * Connections whose TLS handshake failed since it started (apiserver_tls_handshake_errors_total):
   * among them those a client gave up while the server held them unserved, which it still
   * handshakes when it starts serving (the client's hello is in the accept queue).
   */
  tlsHandshakeErrors: number;
}

export async function apiServer(cp: ControlPlane): Promise<ApiServerSample> {
  const p = sample(cp.pids.apiserver!);
  const tls = { ca: cp.caPath, cert: path.join(cp.workDir, 'pki', 'admin.crt'), key: path.join(cp.workDir, 'pki', 'admin.key') };
  const text = (await httpCall(`${cp.server}/metrics`, { tls })).body;
  const lines = text.split('\n');
  const value = (l: string) => Number(l.slice(l.lastIndexOf(' ') + 1));
  const sum = (name: string, filter: (l: string) => boolean) => lines.filter((l) => l.startsWith(`${name}{`) && filter(l)).reduce((n, l) => n + value(l), 0);
  const dispatched: Record<string, number> = {};
  for (const l of lines.filter((x) => x.startsWith('apiserver_flowcontrol_dispatched_requests_total{'))) {
    const fs = /flow_schema="([^"]+)"/.exec(l)?.[1] ?? '?';
    dispatched[fs] = (dispatched[fs] ?? 0) + value(l);
  }
  const watch = (l: string) => l.includes('verb="WATCH"');
  const plain = (name: string) => value(lines.find((l) => l.startsWith(`${name} `)) ?? ' NaN');
  return {
    goInUseMiB: (plain('go_memstats_heap_inuse_bytes') + plain('go_memstats_stack_inuse_bytes')) / 2 ** 20, goroutines: plain('go_goroutines'),
    cpuS: p.cpuS, rssMiB: p.rssMiB, watches: sum('apiserver_longrunning_requests', watch),
    podAndNodeWatches: sum('apiserver_longrunning_requests', (l) => watch(l) && /group="",resource="(pods|nodes)"/.test(l)), dispatched,
    tlsHandshakeErrors: plain('apiserver_tls_handshake_errors_total') || 0,
  };
}

export const kubeletRequests = (s: ApiServerSample) => KUBELET_FLOW_SCHEMAS.reduce((n, fs) => n + (s.dispatched[fs] ?? 0), 0);
export const agentRequests = (s: ApiServerSample) => s.dispatched[AGENT_FLOW_SCHEMA] ?? 0;
const allRequests = (s: ApiServerSample) => Object.values(s.dispatched).reduce((n, x) => n + x, 0);

export interface Window {
  apiserverCpuPerSecond: number;
  apiserverRssMiB: number;
  openWatches: number;
  openPodAndNodeWatches: number;
  requestsPerSecond: { kubelets: number; agents: number; all: number };
}

export function delta(a: ApiServerSample, b: ApiServerSample, seconds: number): Window {
  const rate = (f: (s: ApiServerSample) => number) => (f(b) - f(a)) / seconds;
  return {
    apiserverCpuPerSecond: (b.cpuS - a.cpuS) / seconds,
    apiserverRssMiB: b.rssMiB,
    openWatches: b.watches,
    openPodAndNodeWatches: b.podAndNodeWatches,
    requestsPerSecond: { kubelets: rate(kubeletRequests), agents: rate(agentRequests), all: rate(allRequests) },
  };
}

/** One measured window of `seconds`. */
export async function measureWindow(cp: ControlPlane, seconds: number): Promise<Window> {
  const a = await apiServer(cp);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return delta(a, await apiServer(cp), seconds);
}

export function describeWindow(d: Window): string {
  return `API server ${d.apiserverCpuPerSecond.toFixed(3)} CPU-s/s, RSS ${d.apiserverRssMiB.toFixed(0)} MiB, ${d.openWatches} open watches ` +
    `(${d.openPodAndNodeWatches} of pods or nodes); requests/s kubelets ${d.requestsPerSecond.kubelets.toFixed(2)}, ` +
    `agents ${d.requestsPerSecond.agents.toFixed(2)}, all ${d.requestsPerSecond.all.toFixed(2)}`;
}

/**
 * What one more watch costs the API server: opens `n` watches like the agents' (pods of one
 * node, bookmarks on), spread over `nodeNames`, from one client; samples the API server's RSS
 * and CPU before and with them open (after `holdMs`), and closes them. `http1`: one TLS
 * connection per watch, as the agent's client does; `http2`: two watches per connection, as an
 * agent would hold its pod and Node watches on one HTTP/2 connection (client-go's way).
 */
export async function watchCost(cp: ControlPlane, nodeNames: string[], n: number, protocol: 'http1' | 'http2', holdMs = 15_000): Promise<WatchCost> {
  const https = await import('node:https');
  const http2 = await import('node:http2');
  const { readFileSync } = await import('node:fs');
  const tls = { ca: readFileSync(cp.caPath), cert: readFileSync(path.join(cp.workDir, 'pki', 'admin.crt')), key: readFileSync(path.join(cp.workDir, 'pki', 'admin.key')) };
  const agent = new https.Agent({ keepAlive: true, maxSockets: n + 10, ...tls });
  const url = new URL(cp.server);
  const closers: (() => void)[] = [];
  const idle = async (ms: number) => {
    const a = await apiServer(cp);
    await new Promise((r) => setTimeout(r, ms));
    const b = await apiServer(cp);
    return { rss: b.rssMiB, cpu: (b.cpuS - a.cpuS) / (ms / 1000), watches: b.watches, go: b.goInUseMiB, goroutines: b.goroutines };
  };
  try {
    const before = await idle(holdMs);
    let session: import('node:http2').ClientHttp2Session | undefined;
    // Counted here, by their answers: the API server's gauge also moves with other clients'
    // watches (a kubelet's or an agent's ends at its timeout and reopens), so it cannot say
    // whether ours are all open.
    let opened = 0;
    for (let i = 0; i < n; i++) {
      const p = `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeNames[i % nodeNames.length]}`)}&watch=true&allowWatchBookmarks=true&resourceVersion=0&timeoutSeconds=600`;
      if (protocol === 'http1') {
        const req = https.get({ hostname: url.hostname, port: url.port, agent, path: p }, (res) => {
          if (res.statusCode === 200) opened++;
          res.resume();
        });
        req.on('error', () => undefined);
        closers.push(() => req.destroy());
      } else {
        if (i % 2 === 0) {
          const s = http2.connect(cp.server, tls);
          s.on('error', () => undefined);
          closers.push(() => s.destroy());
          session = s;
        }
        const st = session!.request({ ':path': p });
        st.on('response', (h) => { if (h[':status'] === 200) opened++; });
        st.on('error', () => undefined);
        st.resume();
      }
    }
    for (let i = 0; i < 60 && opened < n; i++) await new Promise((r) => setTimeout(r, 500));
    if (opened < n) throw new Error(`watch cost: only ${opened} of ${n} watches opened`);
    const withThem = await idle(holdMs);
    return {
      protocol, watches: n, rssMiBBefore: Math.round(before.rss), rssMiBWith: Math.round(withThem.rss),
      perWatchKiB: Math.round(((withThem.rss - before.rss) * 1024) / n),
      goInUseMiBBefore: Math.round(before.go), goInUseMiBWith: Math.round(withThem.go), goPerWatchKiB: Math.round(((withThem.go - before.go) * 1024) / n),
      goroutinesPerWatch: Math.round(((withThem.goroutines - before.goroutines) / n) * 10) / 10,
      cpuPerSecondBefore: Math.round(before.cpu * 1000) / 1000, cpuPerSecondWith: Math.round(withThem.cpu * 1000) / 1000,
    };
  } finally {
    for (const c of closers) c();
    agent.destroy();
  }
}

export interface WatchCost {
  protocol: string; watches: number; rssMiBBefore: number; rssMiBWith: number; perWatchKiB: number;
  goInUseMiBBefore: number; goInUseMiBWith: number; goPerWatchKiB: number; goroutinesPerWatch: number;
  cpuPerSecondBefore: number; cpuPerSecondWith: number;
}
