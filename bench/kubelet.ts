// The KEP's syntax on the real kubelet: how long an owner change takes to reach the bytes a
// container reads, beside the floor of the same kubelet carrying a label change of the same
// pod into the same downwardAPI volume. Both are timed the same way: from just before the
// PATCH of the pod (its ownerReferences, or a label) is sent, to the moment an inotify watcher
// in the pod's container (watch-dir, in the node's busybox image) sees the kubelet move the new
// ..data in, on the same CLOCK_MONOTONIC. The owner change goes through the agent (its watch
// event, its PATCH of the annotation); the label change goes to the kubelet directly.
//
// Also: API writes per pod created (the webhook sets the annotation: none expected) and per
// owner change (one PATCH per affected pod), and the agent's idle RSS.
//
//   npm run bench:kubelet                         the published method: 20 pods x 8 rounds, five runs (each a
//                                                 fresh set of pods), the node side weighted 8192 (minutes)
//   npm run bench:kubelet -- --pods=3 --rounds=2 --pairs=1 --node-cpu-shares=0
//                                                 (bench:kubelet:smoke in CI; it asserts no timing)
// --node-cpu-shares=0 leaves the node side unweighted (support/cpugroup.ts needs root to weight it).
//
// Results: bench/results/kubelet.json (or --out) and its chart beside it, kubelet.svg
// (support/kubeletchart.ts; `npm run bench:rerender` redraws it from the JSON).

import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { agentKubeconfig, apply, manifestObjects } from '../localcluster/agentproc.ts';
import { startLocalControlPlane, startRealOrHollowNode } from '../localcluster/clusters.ts';
import { IMAGES, missingForRealNode } from '../localcluster/node/realnode.ts';
import { mergePatch } from '../localcluster/patch.ts';
import { startWebhook } from '../localcluster/webhookproc.ts';
import { buildAgent, startAgent } from './support/agent.ts';
import { CpuGroup } from './support/cpugroup.ts';
import { loadavg, machine } from './support/machine.ts';
import { sample } from './support/proc.ts';
import { renderKubeletChart, type KubeletChartInput } from './support/kubeletchart.ts';
import { dist, nowMs, round, type Dist } from './support/stats.ts';

const { values: flags } = parseArgs({
  options: {
    pods: { type: 'string', default: '20' },
    // The defaults are the method bench/results/kubelet.json was measured with.
    rounds: { type: 'string', default: '8' },
    pairs: { type: 'string', default: '5' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'kubelet.json') },
    'node-cpu-shares': { type: 'string', default: '8192' },
  },
});
const PODS = Number(flags.pods);
const ROUNDS = Number(flags.rounds);
const NS = 'bench';
const NODE = 'bench-kubelet-node';
/** How long a pod is left alone before each change (see runOnce). */
const QUIET_MS = 1_500;
const say = (s: string) => process.stdout.write(`${s}\n`);

export interface KubeletRun {
  floor: Dist;
  owners: Dist;
  /**
   * Changes that took over a second: the kubelet now and then renders a change only at its
   * next periodic sync (syncFrequency, 10 s on this node, 1 min by default), for a label
   * change as for an owner change.
   */
  slow: { floor: number; owners: number };
  /** owners minus floor, per pair of changes of one pod in one round (ms). */
  addedP50: number;
  addedP99: number;
  patchesPerCreate: number;
  patchesPerOwnerChange: number;
  agentIdleRssMiB: number;
  loadavg: number[];
}

/** Moves of ..data the pod's watcher logged, as CLOCK_MONOTONIC ms, from the kubelet's log file on the host. */
function swaps(logsDir: string, pod: V1Pod): number[] {
  const dir = path.join(logsDir, `${NS}_${pod.metadata!.name}_${pod.metadata!.uid}`, 'app');
  let text = '';
  try {
    for (const f of readdirSync(dir)) text += readFileSync(path.join(dir, f), 'utf8');
  } catch { return []; }
  return [...text.matchAll(/ (\d+\.\d+) moved_to \.\.data$/gm)].map((m) => Number(m[1]));
}

async function runOnce(pair: number, env: { core: CoreV1Api; logsDir: string; agent: Awaited<ReturnType<typeof startAgent>>; owners: { name: string; uid: string }[] }): Promise<KubeletRun> {
  const { core, logsDir, agent, owners } = env;
  const ref = (o: { name: string; uid: string }) => [{ apiVersion: 'v1', kind: 'ConfigMap', name: o.name, uid: o.uid }];
  const patchesBefore = await agent.metric('ownerrefs_api_requests_total', 'verb="PATCH"');
  const pods: V1Pod[] = [];
  for (let i = 0; i < PODS; i++) {
    pods.push(await core.createNamespacedPod({ namespace: NS, body: {
      metadata: { name: `p${pair}-${i}`, labels: { bench: '0' }, ownerReferences: ref(owners[0]!) },
      spec: {
        nodeName: NODE, terminationGracePeriodSeconds: 0,
        containers: [{ name: 'app', image: IMAGES.busybox, imagePullPolicy: 'Never', command: ['watch-dir', '/etc/podinfo'], volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }] }],
        volumes: [{ name: 'podinfo', downwardAPI: { items: [
          { path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } }, // the KEP's syntax: the webhook points it at the annotation
          { path: 'floor', fieldRef: { fieldPath: "metadata.labels['bench']" } },
        ] } }],
      },
    } as V1Pod }));
  }
  for (const p of pods) {
    await waitUntil(async () => (await core.readNamespacedPod({ name: p.metadata!.name!, namespace: NS })).status?.phase === 'Running', `${p.metadata!.name} Running`);
  }
  await sleep(2_000);
  const patchesPerCreate = ((await agent.metric('ownerrefs_api_requests_total', 'verb="PATCH"')) - patchesBefore) / PODS;
  const rss = sample(agent.pid).rssMiB;

  /** One change of one pod: the time from just before its PATCH to its watcher seeing ..data moved in. */
  const timed = async (pod: V1Pod, body: object) => {
    const seen = swaps(logsDir, pod).length;
    const t0 = nowMs();
    await core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: NS, body }, mergePatch);
    const at = await waitUntil(() => { const s = swaps(logsDir, pod); return s.length > seen ? s[seen] : undefined; }, `${pod.metadata!.name}: ..data moved`, 30_000);
    return at - t0;
  };
  const floor: number[] = [];
  const ownersMs: number[] = [];
  const added: number[] = [];
  const writesBefore = await agent.metric('ownerrefs_annotation_writes_total', 'result="ok"');
  // The kubelet renders a pod's volumes about once a second at most (30 changes 100 ms apart
  // gave 5 renders): each change waits for the pod to be quiet that long, and the order of the
  // two alternates by round, so neither waits on the other's render.
  const change = async (pod: V1Pod, body: object) => {
    await sleep(QUIET_MS);
    return timed(pod, body);
  };
  for (let r = 1; r <= ROUNDS; r++) {
    await Promise.all(pods.map(async (pod, i) => {
      await sleep(i * ((2 * QUIET_MS) / PODS)); // the pods' changes spread over the round, not in step
      const label = () => change(pod, { metadata: { labels: { bench: String(r) } } });
      const owner = () => change(pod, { metadata: { ownerReferences: ref(owners[r % 2]!) } });
      let f: number;
      let o: number;
      if (r % 2 === 1) {
        f = await label();
        o = await owner();
      } else {
        o = await owner();
        f = await label();
      }
      floor.push(f);
      ownersMs.push(o);
      added.push(o - f);
    }));
  }
  const patchesPerOwnerChange = ((await agent.metric('ownerrefs_annotation_writes_total', 'result="ok"')) - writesBefore) / (PODS * ROUNDS);
  for (const p of pods) await core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: NS, gracePeriodSeconds: 0 });
  const a = dist(added);
  const slow = (xs: number[]) => xs.filter((x) => x > 1_000).length;
  return { floor: dist(floor), owners: dist(ownersMs), slow: { floor: slow(floor), owners: slow(ownersMs) }, addedP50: a.p50, addedP99: a.p99, patchesPerCreate, patchesPerOwnerChange, agentIdleRssMiB: round(rss, 1), loadavg: loadavg() };
}

async function waitUntil<T>(fn: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 120_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

async function main(): Promise<void> {
  const missing = missingForRealNode();
  if (missing.length > 0) throw new Error(`no real node on this machine (it lacks ${missing.join(', ')}); npm run bench:kubelet needs one`);
  const lcp = await startLocalControlPlane({ realNodes: true });
  const { kc, core } = lcp;
  const node = await startRealOrHollowNode({ cp: lcp.cp, name: NODE, hollow: false }); // timed in containers: never a hollow node
  const group = Number(flags['node-cpu-shares']) > 0 ? CpuGroup.create('ownerrefs-bench-node', Number(flags['node-cpu-shares'])) : undefined;
  let webhook: Awaited<ReturnType<typeof startWebhook>> | undefined;
  let agent: Awaited<ReturnType<typeof startAgent>> | undefined;
  try {
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await waitUntil(() => core.readNamespacedServiceAccount({ name: 'default', namespace: NS }).then(() => true, () => false), 'the default ServiceAccount');
    await apply(kc, manifestObjects().filter((o) => o.kind !== 'DaemonSet'));
    webhook = await startWebhook(kc, node.workDir);
    const built = buildAgent();
    agent = await startAgent({ main: built.main, nodeFlags: built.nodeFlags, kubeconfig: await agentKubeconfig(kc, node.workDir, { nodeName: NODE }), nodeName: NODE, kubeletRoot: node.kubeletRoot });
    await waitUntil(() => agent!.ready(), 'the agent ready');
    if (group) {
      // The node's side: the agent, the kubelet and containerd (its shims and the containers stay where the kubelet put them).
      group.add(agent.pid);
      for (const pid of node.pids?.() ?? []) group.add(pid);
    }
    const owners = await Promise.all(['owner-a', 'owner-b'].map(async (name) => {
      const cm = await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name } } });
      return { name, uid: cm.metadata!.uid! };
    }));
    const runs: KubeletRun[] = [];
    for (let pair = 1; pair <= Number(flags.pairs); pair++) {
      const r = await runOnce(pair, { core, logsDir: path.join(node.workDir, 'pod-logs'), agent, owners });
      runs.push(r);
      say(`run ${pair}: owner change p50 ${r.owners.p50} ms, p99 ${r.owners.p99} ms; floor (label) p50 ${r.floor.p50} ms, p99 ${r.floor.p99} ms; ` +
        `added p50 ${r.addedP50} ms, p99 ${r.addedP99} ms; over 1 s: ${r.slow.owners} owner and ${r.slow.floor} label changes of ${PODS * ROUNDS} each; PATCHes per pod created ${r.patchesPerCreate}, per owner change ${r.patchesPerOwnerChange}; agent idle RSS ${r.agentIdleRssMiB} MiB`);
    }
    const out = { date: new Date().toISOString(), machine: machine(), pods: PODS, rounds: ROUNDS, nodeCpuShares: Number(flags['node-cpu-shares']) > 0 ? Number(flags['node-cpu-shares']) : undefined, runs };
    mkdirSync(path.dirname(flags.out!), { recursive: true });
    writeFileSync(flags.out!, JSON.stringify(out, null, 2) + '\n');
    // The chart beside it, from what was just written (bench/rerender.ts redraws it from the file).
    const chart = flags.out!.replace(/\.json$/, '') + '.svg';
    writeFileSync(chart, renderKubeletChart(JSON.parse(readFileSync(flags.out!, 'utf8')) as KubeletChartInput));
    say(`results in ${path.relative(process.cwd(), flags.out!)}, chart in ${path.relative(process.cwd(), chart)}`);
    const bad = runs.filter((r) => r.patchesPerOwnerChange !== 1 || r.patchesPerCreate !== 0);
    if (bad.length > 0) throw new Error(`expected no PATCH per pod created and one per owner change, got ${JSON.stringify(bad.map((r) => [r.patchesPerCreate, r.patchesPerOwnerChange]))}`);
  } finally {
    await agent?.stop();
    await webhook?.stop();
    await node.stop(); // before the group goes: containerd's shims started in it
    group?.remove();
    await lcp.stop();
  }
}

if (import.meta.main) {
  main().then(() => process.exit(0), (err: unknown) => {
    process.stderr.write(`bench:kubelet failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  });
}
