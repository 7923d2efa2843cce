// Floor probe (child process): a bare watch client on the same API server, watching
// the same pods as the agent (fieldSelector spec.nodeName), one watch per node. It
// records, per pod, when the watch event carrying the expected owner arrived: the
// earliest any watcher could know. It parses each event with JSON.parse, as any client
// (and the agent) must.
//
// argv: <kubeconfig> <node name>[,<node name>...]
// arm: { expect: { podUid: ownerUid }, match?: 'first' (default: the first owner is it),
//        'has' (some owner is it) or 'lacks' (no owner is it) }

import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { KubeCredentials } from '../../agent/kube/kubeconfig.ts';
import { serve } from '../support/ipc.ts';
import { nowMs } from '../support/stats.ts';

const [kubeconfig, nodeNames] = process.argv.slice(2) as [string, string];
const creds = KubeCredentials.fromFile(kubeconfig);
const server = new URL(creds.getCurrentCluster().server);
const selectorOf = (node: string) => `fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}`;
type Match = 'first' | 'has' | 'lacks';
const matches: Record<Match, (owners: { uid: string }[], want: string) => boolean> = {
  first: (o, want) => o[0]?.uid === want,
  has: (o, want) => o.some((x) => x.uid === want),
  lacks: (o, want) => !o.some((x) => x.uid === want),
};
let match: Match = 'first';

interface PodEvent {
  type: string;
  object: { metadata?: { uid?: string; resourceVersion?: string; ownerReferences?: { uid: string }[] } };
}

let expect = new Map<string, string>(); // pod uid -> owner uid the next event should carry
let seen = new Map<string, number>();
let waiter: (() => void) | undefined;
let events = 0;
let bytes = 0;
let agent: https.Agent | undefined;

async function request(path: string): Promise<IncomingMessage> {
  const opts: https.RequestOptions = {};
  await creds.applyToHTTPSOptions(opts);
  agent ??= new https.Agent({ keepAlive: true, ca: opts.ca, cert: opts.cert, key: opts.key });
  return new Promise((resolve, reject) => {
    https.get({ hostname: server.hostname, port: server.port, path, headers: { Accept: 'application/json', ...(opts.headers as object) }, agent }, resolve)
      .on('error', reject);
  });
}

async function list(selector: string): Promise<string> {
  const res = await request(`/api/v1/pods?${selector}&limit=1`);
  let text = '';
  for await (const c of res) text += String(c);
  return (JSON.parse(text) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

async function watchForever(selector: string, from: string): Promise<void> {
  let rv = from;
  for (;;) {
    const res = await request(`/api/v1/pods?${selector}&watch=true&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=3600`);
    if (res.statusCode !== 200) throw new Error(`watch: HTTP ${res.statusCode}`);
    let buf = '';
    for await (const chunk of res) {
      const at = nowMs();
      bytes += (chunk as Buffer).length;
      buf += String(chunk);
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const ev = JSON.parse(line) as PodEvent;
        const md = ev.object.metadata;
        if (md?.resourceVersion) rv = md.resourceVersion;
        if (ev.type === 'BOOKMARK' || !md?.uid) continue;
        events++;
        const want = expect.get(md.uid);
        if (want !== undefined && !seen.has(md.uid) && matches[match](md.ownerReferences ?? [], want)) {
          seen.set(md.uid, at);
          if (seen.size === expect.size) waiter?.();
        }
      }
    }
  }
}

serve({
  async start() {
    const rvs: string[] = [];
    for (const node of nodeNames.split(',')) {
      const selector = selectorOf(node);
      const rv = await list(selector);
      rvs.push(rv);
      void watchForever(selector, rv).catch((err: unknown) => {
        process.stderr.write(`floor watch failed: ${String(err)}\n`);
        process.exit(1);
      });
    }
    return { rv: rvs[0] };
  },
  arm(m) {
    expect = new Map(Object.entries(m.expect as Record<string, string>));
    match = (m.match as Match | undefined) ?? 'first';
    seen = new Map();
    return {};
  },
  async wait(m) {
    if (seen.size < expect.size) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, m.timeoutMs as number);
        waiter = () => { clearTimeout(t); r(); };
      });
      waiter = undefined;
    }
    return { times: Object.fromEntries(seen), missing: [...expect.keys()].filter((k) => !seen.has(k)) };
  },
  count(m) {
    const r = { events, bytes };
    if (m.reset) { events = 0; bytes = 0; }
    return r;
  },
});
