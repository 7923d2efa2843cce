// The admission webhook's cost, against the real API server: pod-create latency with the
// webhook (pods in KEP-4753 syntax, rewritten on the way in; and the same pods already in
// their rewritten form, as a workload's pods are, which call it to have their annotation set)
// beside the floor (the same pods without the fields, which the API server admits without a
// call), in one run, interleaved in rounds so that machine noise falls on all of them. Each
// round's added p50 and p95 (50 creates each way) are kept: their spread says how much of a
// difference is the webhook and how much one round's stall.
// Creates are open-loop at --rate per second (each is sent on schedule, whether or not
// earlier ones have been answered), so a slow answer cannot hide the ones queued behind it.
// Also the webhook process's RSS idle, at its peak under load, and after. The webhook runs
// compiled, with the image's Node flags (NODE_FLAGS), as webhook.yaml runs it.
//
//   npm run bench:webhook                       1000 creates each way at 50/s
//   npm run bench:webhook -- --creates=100      (bench:webhook:smoke in CI)
//
// Run by `npm run bench` too (its webhook section). Results: bench/results/webhook.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { readFileSync } from 'node:fs';
import { AppsV1Api, CoreV1Api, KubeConfig, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { apply } from '../localcluster/agentproc.ts';
import { startWebhook } from '../localcluster/webhookproc.ts';
import { mutate } from '../agent/admission/webhook/objects.ts';
import { applyPatch } from '../agent/cli/patch.ts';
import type { BenchCluster } from './support/cluster.ts';
import { NS, startBenchCluster } from './support/cluster.ts';
import { loadavg, machine } from './support/machine.ts';
import { sample } from './support/proc.ts';
import { dist, pool, round, type Dist } from './support/stats.ts';
import { createAt, kepPod, plain } from './support/webhookpods.ts';
import { TMP, buildAgent } from './support/agent.ts';
import { NODE_FLAGS } from '../agent/config.ts';

export interface WebhookResults {
  rate: number;
  creates: number;
  withWebhook: Dist;
  /** The same pods, pre-rewritten: they read the annotation, so the webhook is called to set it. */
  annotationReaders: Dist;
  /** The floor: the same pods without the fields (no webhook call). */
  without: Dist;
  /** p50 and p99 of with minus without, ms, over all creates. */
  addedP50: number;
  addedP99: number;
  /** Per round (ROUND creates each way), KEP syntax minus the floor: p50 and p95, ms. */
  rounds: { addedP50: number; addedP95: number }[];
  /**
   * Pods that read their workload (the webhook reads their owner's metadata at admission):
   * warm, all owned by one Deployment already read; cold, each by a Deployment never read.
   */
  workloadWarm: Dist;
  workloadCold: Dist;
  addedWarmP99: number;
  /** Owner reads per distinct owner, warm and cold phases together (one while cached). */
  readsPerOwner: number;
  rssMiB: { idle: number; peak: number; after: number };
  reviews: number;
  loadavg: number[];
}

const ROUND = 50; // creates per round; rounds alternate with / without

/** A pod that reads its workload, owned by a Deployment directly (its controller leaves such pods alone: no release). */
function workloadPod(i: number, owner: { name: string; uid: string }): V1Pod {
  return {
    metadata: { name: `wl-${i}`, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: owner.name, uid: owner.uid, controller: true }], labels: { app: 'wh' } },
    spec: {
      nodeSelector: { 'ownerrefs.dev/nowhere': 'true' },
      containers: [{ name: 'app', image: 'busybox', env: ['workload-name', 'otel-resource-attributes'].map((k) => ({ name: k.toUpperCase().replaceAll('-', '_'),
        valueFrom: { fieldRef: { fieldPath: `metadata.annotations['ownerrefs.dev/${k}']` } } })) }],
    },
  };
}

/** The same pod as the webhook would leave it: what the API server stores either way. */
function rewritten(pod: V1Pod): V1Pod {
  const m = mutate('Pod', pod);
  if (!m.allowed) throw new Error(m.message);
  return applyPatch(pod, m.patch);
}

export async function benchWebhook(cluster: BenchCluster, opts: { creates: number; rate: number; workDir: string; main: string; nodeFlags?: readonly string[] }): Promise<WebhookResults> {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.cp.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: 'ownerrefs-system' } } }).catch(() => undefined);
  // Compiled, with the image's Node flags: what webhook.yaml runs.
  // Its owner reads: get on the workload kinds (rbac-follow-owners.yaml).
  await apply(kc, parseAllDocuments(readFileSync(path.join(import.meta.dirname, '..', 'rbac-follow-owners.yaml'), 'utf8')).map((d) => d.toJS() as KubernetesObject).filter(Boolean));
  const apps = kc.makeApiClient(AppsV1Api);
  const deployment = async (name: string) => {
    const d = await apps.createNamespacedDeployment({ namespace: NS, body: { metadata: { name }, spec: { replicas: 0, selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } } } });
    return { name, uid: d.metadata!.uid! };
  };
  const warmOwner = await deployment('wl-warm');
  const cold = Math.min(opts.creates, 200);
  const coldOwners = await pool(Array.from({ length: cold }, (_, i) => i), 8, (i) => deployment(`wl-cold-${i}`));
  const webhook = await startWebhook(kc, opts.workDir, { main: opts.main, nodeFlags: opts.nodeFlags ?? NODE_FLAGS });
  try {
    const owner = cluster.owners[0];
    // Warm both paths (connections, the API server's caches, V8 in the webhook).
    await createAt(core, [kepPod(-1, owner), rewritten(kepPod(-2, owner)), plain(kepPod(-4, owner)), workloadPod(-3, warmOwner)].map((p, k) => ({ ...p, metadata: { ...p.metadata, name: `warm-${k}` } })), opts.rate);
    await sleep(2_000);
    const idle = sample(webhook.child.pid!).rssMiB;
    let peak = idle;
    const sampler = setInterval(() => { peak = Math.max(peak, sample(webhook.child.pid!).rssMiB); }, 100);
    const withWebhook: number[] = [];
    const readers: number[] = [];
    const without: number[] = [];
    const warm: number[] = [];
    const rounds: { addedP50: number; addedP95: number }[] = [];
    const reviews0 = await webhook.metric('ownerrefs_webhook_reviews_total', 'result="mutated"');
    const reads0 = await webhook.metric('ownerrefs_webhook_owner_reads_total');
    for (let r = 0; r * ROUND < opts.creates; r++) {
      const ids = Array.from({ length: Math.min(ROUND, opts.creates - r * ROUND) }, (_, k) => r * ROUND + k);
      // Rotate which goes first, so none always meets a warmer or colder API server.
      const kep: number[] = [];
      const floor: number[] = [];
      const phases: [number[][], (i: number) => V1Pod][] = [[[withWebhook, kep], (i) => kepPod(i, owner)], [[readers], (i) => rewritten(kepPod(opts.creates + i, owner))],
        [[without, floor], (i) => plain(kepPod(2 * opts.creates + i, owner))], [[warm], (i) => workloadPod(i, warmOwner)]];
      for (let k = 0; k < phases.length; k++) {
        const [outs, make] = phases[(r + k) % phases.length]!;
        const ms = await createAt(core, ids.map(make), opts.rate);
        for (const out of outs) out.push(...ms);
      }
      const [a, b] = [dist(kep), dist(floor)];
      rounds.push({ addedP50: round(a.p50 - b.p50), addedP95: round(a.p95 - b.p95) });
    }
    // Cold: each pod's owner read for the first time, at admission.
    const coldMs = await createAt(core, coldOwners.map((o, i) => workloadPod(opts.creates + i, o)), opts.rate);
    const readsPerOwner = ((await webhook.metric('ownerrefs_webhook_owner_reads_total')) - reads0) / (1 + cold);
    clearInterval(sampler);
    const reviews = (await webhook.metric('ownerrefs_webhook_reviews_total', 'result="mutated"')) - reviews0;
    await sleep(2_000);
    const after = sample(webhook.child.pid!).rssMiB;
    const w = dist(withWebhook);
    const o = dist(without);
    const ar = dist(readers);
    const wl = dist(warm);
    return {
      rate: opts.rate, creates: opts.creates, withWebhook: w, annotationReaders: ar, without: o,
      addedP50: round(w.p50 - o.p50), addedP99: round(w.p99 - o.p99), rounds,
      workloadWarm: wl, workloadCold: dist(coldMs), addedWarmP99: round(wl.p99 - o.p99), readsPerOwner: round(readsPerOwner, 2),
      rssMiB: { idle: round(idle, 1), peak: round(peak, 1), after: round(after, 1) }, reviews, loadavg: loadavg(),
    };
  } finally {
    await webhook.stop();
    await core.deleteCollectionNamespacedPod({ namespace: NS, labelSelector: 'app=wh' }).catch(() => undefined);
    await apps.deleteCollectionNamespacedDeployment({ namespace: NS }).catch(() => undefined);
  }
}

export function printWebhook(r: WebhookResults): void {
  const row = (what: string, d: Dist) => `  ${what.padEnd(34)} p50 ${d.p50.toFixed(2).padStart(7)} ms  p99 ${d.p99.toFixed(2).padStart(7)} ms  max ${d.max.toFixed(1).padStart(7)} ms`;
  console.log(`webhook: ${r.creates} pod creates each way at ${r.rate}/s, interleaved (load ${r.loadavg.map((x) => x.toFixed(2)).join(' ')})`);
  console.log(row('with the webhook (KEP syntax)', r.withWebhook));
  console.log(row('pre-rewritten (annotation set)', r.annotationReaders));
  console.log(row('floor (no webhook call)', r.without));
  console.log(`  added: p50 ${r.addedP50.toFixed(2)} ms, p99 ${r.addedP99.toFixed(2)} ms; ${r.reviews} reviews mutated`);
  const spread = (xs: number[]) => { const s = [...xs].sort((x, y) => x - y); return `median ${s[Math.floor(s.length / 2)]!.toFixed(2)}, ${s[0]!.toFixed(2)} to ${s.at(-1)!.toFixed(2)}`; };
  console.log(`  per round of ${ROUND} (${r.rounds.length} rounds): added p50 ${spread(r.rounds.map((x) => x.addedP50))} ms; added p95 ${spread(r.rounds.map((x) => x.addedP95))} ms`);
  console.log(row('reading their workload, owner read', r.workloadWarm));
  console.log(row('reading their workload, owner new', r.workloadCold));
  console.log(`  added for the workload, owner read: p99 ${r.addedWarmP99.toFixed(2)} ms; owner reads per owner: ${r.readsPerOwner}`);
  console.log(`  webhook RSS: idle ${r.rssMiB.idle} MiB, peak under load ${r.rssMiB.peak} MiB, after ${r.rssMiB.after} MiB`);
}

if (import.meta.main) {
  const { values } = parseArgs({ options: {
    creates: { type: 'string', default: '1000' }, rate: { type: 'string', default: '50' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'webhook.json') },
    // Node flags for the webhook, comma-separated; default the image's (NODE_FLAGS).
    'node-flags': { type: 'string' },
  } });
  const workDir = path.join(TMP, `webhook-${process.pid}`);
  mkdirSync(workDir, { recursive: true });
  const cluster = await startBenchCluster('bench-node', workDir);
  try {
    const r = await benchWebhook(cluster, { creates: Number(values.creates), rate: Number(values.rate), workDir, main: buildAgent(undefined, 'webhook').main,
      ...(values['node-flags'] !== undefined ? { nodeFlags: values['node-flags'].split(',').filter(Boolean) } : {}) });
    printWebhook(r);
    mkdirSync(path.dirname(values.out), { recursive: true });
    writeFileSync(values.out, JSON.stringify({ machine: machine(), versions: cluster.versions, webhook: r }, null, 2) + '\n');
  } finally {
    await cluster.stop();
  }
}
