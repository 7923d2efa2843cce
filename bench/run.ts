// `npm run bench`: the agent against the real control plane at N pods per node.
// Measures start-up, propagation latency (with a bare watch client as the floor),
// unrelated churn, memory, CPU and API cost; writes bench/results/latest.json and a
// chart; then the webhook (bench/webhook.ts) and the KEP's syntax on the real kubelet
// (bench/kubelet.ts). docs/contributing/benchmarks.md has the method, docs/PERFORMANCE.md the results.
//
//   npm run bench                          N = 100, 500, 1000 (about 9 min on 2 cores)
//   npm run bench:smoke                    N = 20, for CI (no timing is asserted anywhere)
//   npm run bench -- --baseline-ref=REF    also measure the idle RSS of the agent at REF
//   npm run bench -- --agent-ref=REF --sizes=1000 --no-extras --out=bench/results/tmp/REF.json
//                                          the agent at REF instead of the work tree (before/after)
//   npm run bench -- --what-if=poolfs,nowatch   only these what-if variants (--what-if= : none)
//   npm run bench -- --sizes=1000 --no-extras --pairs=5   the default and the features-on agent
//                                          alternately, five times each, at the largest N
//   npm run bench -- --sizes=1000 --no-extras --pairs=3 --node-cpu-shares=8192
//                                          the same with the node side (agents, floor, file probe)
//                                          weighted 8x the control plane on the shared cores
//   npm run bench -- --sizes=1000 --no-extras --pairs=3 --no-quiet-probe
//                                          propagation as an inotify probe sees it (woken by each
//                                          of the agent's writes), not by the files' ctime
//
// Flags: --sizes=100,500,1000 --out=FILE.json --chart=FILE.svg --baseline-ref=REF --agent-ref=REF
//        --what-if=KEY,... --bundle --profile --volumes=memory|disk --no-extras --pairs=K --node-cpu-shares=N
//        --no-quiet-probe

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { missingForRealNode } from '../localcluster/node/realnode.ts';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { NODE_FLAGS } from '../agent/config.ts';
import { TMP, buildAgent, buildVariants, bundleAgent, fsType, startAgent } from './support/agent.ts';
import type { AgentProcess } from '../localcluster/agentproc.ts';
import { renderChart } from './support/chart.ts';
import { startBenchCluster } from './support/cluster.ts';
import { ProbeProcess } from './support/ipc.ts';
import { measureN, waitUntil } from './support/measure.ts';
import { clearFiles, createPods, switchOwners, type BenchPod } from './support/pods.ts';
import { FEATURES_LABEL, IDLE_SCRAPES, IDLE_SETTLE_MS, SHIPPED_IDLE, updateDocs, type PairRun, type Results } from './support/report.ts';
import { cpuBetween, sample } from './support/proc.ts';
import { CpuGroup } from './support/cpugroup.ts';
import { benchWebhook, printWebhook } from './webhook.ts';
import { gitState, loadavg, machine } from './support/machine.ts';
import { nowMs, round } from './support/stats.ts';

const ROOT = path.join(import.meta.dirname, '..');
const NODE = 'bench-node';
const DEFAULT_OUT = path.join(ROOT, 'bench/results/latest.json');
const SETTLE_MS = 3_000;
const RESYNC_S = 5;
// The agent's periodic disk verification is switched off while measuring (it would
// land at random in a phase); its cost is measured on its own at the largest N.
const NO_RESYNC = ['--resync-seconds=3600'];

const { values: flags } = parseArgs({
  options: {
    sizes: { type: 'string', default: '100,500,1000' },
    out: { type: 'string', default: DEFAULT_OUT },
    chart: { type: 'string', default: path.join(ROOT, 'bench/results/latest.svg') },
    'baseline-ref': { type: 'string' },
    // Measure the agent at this git ref instead of the work tree's (with that ref's NODE_FLAGS).
    'agent-ref': { type: 'string' },
    // Also measure the idle RSS of the agent bundled with rolldown.
    bundle: { type: 'boolean', default: false },
    // What-if variants to run at the largest N (keys of WHAT_IF); default DEFAULT_WHAT_IF.
    'what-if': { type: 'string' },
    // Write a V8 CPU profile of each measured agent to bench/results/tmp/prof (slower).
    profile: { type: 'boolean', default: false },
    // Where volume directories live: tmpfs, like the documented `medium: Memory`
    // emptyDir, or the disk under the temporary directory (a default emptyDir).
    volumes: { type: 'string', default: 'memory' },
    // --no-extras (CI smoke): the shipped agents only, default and every feature on: no idle or
    // what-if variants, no resync measurement.
    extras: { type: 'boolean', default: true },
    // Alternating pairs (default agent, then every feature on) at the largest N, the first
    // being the two measured anyway: one run's ratio to the floor is one noisy sample.
    // Default 3 in the full run, 1 with --no-extras.
    pairs: { type: 'string' },
    // A what-if of the machine (support/cpugroup.ts): every agent, the floor and the file probe
    // in a CPU cgroup of this weight (cpu.shares; 1024 is everyone else's). Root only.
    'node-cpu-shares': { type: 'string' },
    // The file probe does not watch during the bursts: propagation by each file's ctime, read
    // after the burst (bench/probes/files.ts), so the probe never takes the CPU from the agent.
    // --no-quiet-probe: an inotify probe, woken by each of the agent's writes during the bursts.
    'quiet-probe': { type: 'boolean', default: true },
  },
  allowNegative: true,
});
const sizes = flags.sizes.split(',').map(Number).sort((a, b) => a - b);
const pairs = Number(flags.pairs ?? (flags.extras ? 3 : 1));
if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`--pairs: a whole number of at least 1, not ${flags.pairs}`);

/**
 * A variant of the agent (not the product as shipped): the same compiled agent with one
 * module swapped by bench/variants/hook.ts (`shims`), other Node flags, or other environment.
 */
interface Variant {
  label: string;
  shims?: string[];
  env?: Record<string, string>;
  /** Replaces the shipped NODE_FLAGS. */
  nodeFlags?: string[];
}

// Idle RSS: what the idle target (70 MB) depends on. In a pod the agent reads in-cluster
// credentials and never loads the YAML parser; the bench hands it a kubeconfig file, so the
// "as in a pod" rows swap yaml for JSON.parse, and the others build on that.
const OPT = ['--no-opt', '--no-maglev'];
const without = (drop: string[]) => NODE_FLAGS.filter((f) => !drop.includes(f));
// glibc's malloc returns freed blocks above 128 KiB to the kernel at once (mallopt(3));
// by default it raises that bound as large blocks are freed, and keeps them.
const MALLOC_FIXED = { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_TRIM_THRESHOLD_: '131072' };
const IDLE_VARIANTS: Variant[] = [
  { label: "V8's default heap growth (NODE_FLAGS without --memory-saver-mode)", nodeFlags: without(['--memory-saver-mode']) },
  { label: "with V8's optimising compilers (NODE_FLAGS without --no-opt --no-maglev)", nodeFlags: without(OPT) },
  { label: "Node's default young generation (NODE_FLAGS without --max-semi-space-size=1)", nodeFlags: without(['--max-semi-space-size=1']) },
  { label: 'malloc thresholds fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_)', env: MALLOC_FIXED },
  { label: 'as in a pod: no YAML parser loaded (in-cluster credentials)', shims: ['noyaml'] },
  { label: 'as in a pod, hand-written metrics instead of prom-client', shims: ['noyaml', 'metrics'] },
  { label: 'as in a pod, hand-written metrics, minimal logger instead of pino', shims: ['noyaml', 'metrics', 'logger'] },
];

// What-ifs at the largest N: what the remaining latency and memory gaps depend on.
const LEAN = ['noyaml', 'metrics', 'logger'];
const WHAT_IF: Record<string, Variant> = {
  nowatch: { label: 'no directory watcher (no inotify, no stamp checks; self-heal off)', shims: ['nowatch'] },
  poolfs: { label: "writer on libuv's thread pool for tmpfs too (no inline calls)", shims: ['poolfs'] },
  pool2: { label: 'UV_THREADPOOL_SIZE=2 (libuv default 4)', env: { UV_THREADPOOL_SIZE: '2' } },
  semispace: { label: "Node's default young generation (without --max-semi-space-size=1)", nodeFlags: without(['--max-semi-space-size=1']) },
  opt: { label: "V8's optimising compilers on (without --no-opt --no-maglev)", nodeFlags: without(OPT) },
  malloc: { label: 'malloc thresholds fixed at 128 KiB', env: MALLOC_FIXED },
  memsaver: { label: "V8's default heap growth (without --memory-saver-mode)", nodeFlags: without(['--memory-saver-mode']) },
  lean: { label: 'no YAML parser, hand-written metrics and logger', shims: LEAN },
  lite: { label: "V8's lite mode (NODE_FLAGS plus --lite-mode: no Sparkplug, no feedback vectors)", nodeFlags: [...NODE_FLAGS, '--lite-mode'] },
  stgc: { label: "V8's single-threaded GC (NODE_FLAGS plus --single-threaded-gc: no concurrent marking or sweeping)", nodeFlags: [...NODE_FLAGS, '--single-threaded-gc'] },
};
/**
 * Every optional feature of the agent on (held to the same targets), in the same run as the agent
 * with its defaults: the CSI driver served (gRPC loaded), owners followed (the node
 * labelled ownerrefs.dev/follow-owners=true; the bench pods' owners are ConfigMaps, so
 * --follow-kinds adds them, and a ClusterRole lets the agent get them) and the node file
 * (on by default). The webhook is its own process (bench/webhook.ts).
 */
const followArgs = ['--follow-kinds=/v1/ConfigMap=configmaps'];
const featureArgs = (work: string) => [`--csi-socket=${path.join(work, 'csi', 'csi.sock')}`, '--registration-dir=', ...followArgs];
/** The same without the CSI driver: what gRPC costs of the above. */
const FOLLOW_LABEL = 'following owners and the node file (emptyDir mode: no CSI driver)';
const DEFAULT_WHAT_IF = ['nowatch', 'poolfs', 'pool2', 'semispace', 'opt', 'memsaver', 'malloc', 'lean', 'lite', 'stgc'];
const whatIfKeys = flags['what-if'] === undefined ? DEFAULT_WHAT_IF : flags['what-if'].split(',').filter(Boolean);
for (const k of whatIfKeys) if (!WHAT_IF[k]) throw new Error(`--what-if: unknown ${k}; known: ${Object.keys(WHAT_IF).join(', ')}`);
const t0 = nowMs();
const say = (msg: string) => process.stdout.write(`${((nowMs() - t0) / 1000).toFixed(1).padStart(6)}s  ${msg}\n`);

async function main(): Promise<void> {
  const result: Record<string, unknown> = {
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    ...(flags['node-cpu-shares'] ? { nodeCpuShares: Number(flags['node-cpu-shares']) } : {}),
    quietProbe: flags['quiet-probe'],
    date: new Date().toISOString(),
    machine: machine(),
    git: gitState(),
    loadBefore: loadavg(),
    idleScrapes: IDLE_SCRAPES,
  };
  const ref = flags['agent-ref'];
  say(`building the agent ${ref ? `at ${ref}` : 'of the work tree'} (compiled JS, as the image runs it)${flags['baseline-ref'] ? ` and the baseline at ${flags['baseline-ref']}` : ''}`);
  const agent = buildAgent(ref);
  if (ref) result.agentRef = { ref, nodeFlags: agent.nodeFlags };
  const mainJs = agent.main;
  // Bundling only with --bundle: it saved nothing measurable.
  const bundleJs = flags.extras && flags.bundle ? bundleAgent(mainJs) : undefined;
  const baseline = flags['baseline-ref'] ? buildAgent(flags['baseline-ref']) : undefined;
  const hook = flags.extras ? buildVariants() : '';

  const work = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-bench-'));
  if (flags.volumes !== 'memory' && flags.volumes !== 'disk') throw new Error('--volumes must be memory or disk');
  const kubeletRoot = flags.volumes === 'memory' ? mkdtempSync('/dev/shm/ownerrefs-bench-kubelet-') : path.join(work, 'kubelet');
  result.volumes = flags.volumes === 'memory' ? 'tmpfs (/dev/shm), as a medium: Memory emptyDir' : `disk (${fsType(work)} under ${os.tmpdir()})`;
  const cleanups: (() => Promise<unknown>)[] = [async () => {
    rmSync(work, { recursive: true, force: true });
    rmSync(kubeletRoot, { recursive: true, force: true });
  }];
  try {
    const cluster = await startBenchCluster(NODE, work);
    cleanups.unshift(() => cluster.stop());
    result.versions = { ...cluster.versions, node: process.version };
    say(`control plane ${cluster.versions.kubernetes} up; node ${NODE} with pods capacity 2000`);
    const floor = new ProbeProcess(path.join(import.meta.dirname, 'probes/floor.ts'), [cluster.cp.kubeconfigPath, NODE]);
    const files = new ProbeProcess(path.join(import.meta.dirname, 'probes/files.ts'));
    cleanups.unshift(() => floor.stop(), () => files.stop());
    await floor.call('start');
    const nodeSide = flags['node-cpu-shares'] ? CpuGroup.create(`ownerrefs-bench-node-${process.pid}`, Number(flags['node-cpu-shares'])) : undefined;
    if (nodeSide) {
      cleanups.unshift(async () => nodeSide.remove());
      for (const p of [floor, files]) nodeSide.add(p.child.pid!);
      say(`node side (agents, floor, file probe) in ${nodeSide.dir}, cpu.shares ${flags['node-cpu-shares']}`);
    }

    const mo = { say, quietCpuS: flags.profile ? 0.015 : 0.002, quietProbe: flags['quiet-probe'] };
    await cluster.allowFollowing('configmaps');
    /** Starts an agent with the node labelled to follow owners; the label goes when that agent stops. */
    const withFeatures = async (start: () => Promise<AgentProcess>): Promise<AgentProcess> => {
      await cluster.setNodeLabel('ownerrefs.dev/follow-owners', 'true');
      const a = await start();
      const stop = a.stop.bind(a);
      a.stop = async (...args) => {
        const code = await stop(...args);
        await cluster.setNodeLabel('ownerrefs.dev/follow-owners', null);
        return code;
      };
      return a;
    };
    const nodeArgs = flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(TMP, 'prof')}`] : [];
    const run = async (main: string, extra: string[] = [], v: Variant = { label: 'as shipped' }) => {
      const a = await startAgent({
        main, kubeconfig: cluster.agentKubeconfig, nodeName: NODE, kubeletRoot, args: [...NO_RESYNC, ...extra],
        nodeFlags: v.nodeFlags ?? agent.nodeFlags,
        nodeArgs: [...(v.shims?.length ? ['--import', hook] : []), ...nodeArgs],
        env: { ...v.env, ...(v.shims?.length ? { OWNERREFS_BENCH_SHIMS: v.shims.join(',') } : {}) },
      });
      nodeSide?.add(a.pid); // from its first log line on: start-up is not what this what-if is about
      return a;
    };

    // --- Idle: no pod on the node has opted in.
    const idle: Record<string, unknown> = {};
    const idleRuns: [string, () => Promise<AgentProcess>][] = [[SHIPPED_IDLE, () => run(mainJs)], [FEATURES_LABEL, () => withFeatures(() => run(mainJs, featureArgs(work)))],
      [FOLLOW_LABEL, () => withFeatures(() => run(mainJs, followArgs))]];
    if (flags.extras) {
      for (const v of IDLE_VARIANTS) idleRuns.push([v.label, () => run(mainJs, [], v)]);
      if (bundleJs) idleRuns.push(['bundled with rolldown', () => run(bundleJs)]);
    }
    if (baseline) {
      const b = flags['baseline-ref']!;
      const runB = (main: string) => startAgent({ main, kubeconfig: cluster.agentKubeconfig, nodeName: NODE, kubeletRoot, args: NO_RESYNC, nodeFlags: baseline.nodeFlags });
      idleRuns.push([`baseline ${b} (compiled JS)`, () => runB(baseline.main)]);
    }
    for (const [label, start] of idleRuns) {
      const a = await start();
      await waitUntil(() => a.ready(), 'agent ready');
      await sleep(SETTLE_MS);
      const s = sample(a.pid);
      // Then what hours of idling in a cluster bring: Prometheus scrapes and kubelet probes,
      // which warm up more code (V8's optimising compilers are paged in; RSS levels off).
      for (let i = 0; i < IDLE_SCRAPES; i++) {
        await (await fetch(`http://127.0.0.1:${a.healthPort}/metrics`)).text();
        await (await fetch(`http://127.0.0.1:${a.healthPort}/healthz`)).text();
      }
      await sleep(1_000);
      const s2 = sample(a.pid);
      // 1,200 requests in a few seconds are a burst, not idling: the heap they grew is
      // garbage V8's memory saver mode gives back within seconds. What stays (warmed-up
      // code, caches) is the idle RSS of an agent that Prometheus scrapes every 15-30 s.
      await sleep(IDLE_SETTLE_MS);
      const s3 = sample(a.pid);
      idle[label] = {
        rssMiB: round(s.rssMiB, 1), hwmMiB: round(s.hwmMiB, 1), rssAfterScrapesMiB: round(s2.rssMiB, 1), rssSettledMiB: round(s3.rssMiB, 1),
        startedMs: round(a.startedAt - a.spawnedAt, 1), load: loadavg(),
      };
      say(`idle RSS ${label}: ${s.rssMiB.toFixed(1)} MiB (peak ${s.hwmMiB.toFixed(1)}), ${s2.rssMiB.toFixed(1)} after ${IDLE_SCRAPES} scrapes, ` +
        `${s3.rssMiB.toFixed(1)} ${IDLE_SETTLE_MS / 1000} s later; 'agent started' after ${(a.startedAt - a.spawnedAt).toFixed(0)} ms`);
      await a.stop();
    }
    result.idle = idle;

    // --- Each N: fresh agent, start-up, propagation bursts, churn, memory, API cost.
    const pods: BenchPod[] = [];
    const perN: Record<string, unknown>[] = [];
    // Every pod back to owner A (earlier rounds may have left B), files removed.
    const reset = async (all: BenchPod[]) => {
      const onB = all.filter((p) => p.owner.uid !== cluster.owners[0].uid);
      if (onB.length) await switchOwners(cluster.api, onB, cluster.owners[0]);
      await clearFiles(all);
      await sleep(1_000);
    };
    for (const n of sizes) {
      say(`creating pods ${pods.length}..${n - 1} and their volume directories`);
      pods.push(...await createPods(cluster.api, kubeletRoot, NODE, pods.length, n, cluster.owners[0]));
      await reset(pods);
      perN.push(await measureN(n, pods, cluster, floor, files, () => run(mainJs), mo));
    }
    result.perN = perN;

    // --- Every optional feature on, at the largest N, in this same run (the same budget).
    say(`every optional feature on at N=${pods.length}`);
    await reset(pods);
    const atLargest = (start: () => Promise<AgentProcess>) => measureN(pods.length, pods, cluster, floor, files, start, mo);
    const withEveryFeature = () => withFeatures(() => run(mainJs, featureArgs(work)));
    const featuresOn = { variant: FEATURES_LABEL, ...await atLargest(withEveryFeature) };
    result.featuresOn = featuresOn;
    // --- More alternating pairs of the two (the first pair is the two just measured).
    const pairRuns: PairRun[] = [{ defaults: pairOf(perN[perN.length - 1]!), features: pairOf(featuresOn) }];
    for (let k = 1; k < pairs; k++) {
      say(`pair ${k + 1} of ${pairs} at N=${pods.length}: defaults, then every optional feature on`);
      await reset(pods);
      const defaults = pairOf(await atLargest(() => run(mainJs)));
      await reset(pods);
      pairRuns.push({ defaults, features: pairOf(await atLargest(withEveryFeature)) });
    }
    result.pairs = pairRuns;

    // --- What-if runs at the largest N (not the product as shipped; docs/contributing/benchmarks.md).
    const whatIf: Record<string, unknown>[] = [];
    for (const key of flags.extras ? whatIfKeys : []) {
      const v = WHAT_IF[key]!;
      say(`what-if at N=${pods.length}: ${v.label}`);
      await reset(pods);
      const r = await measureN(pods.length, pods, cluster, floor, files, () => run(mainJs, [], v), mo);
      // Per-pod samples only for the product as shipped (the chart's); distributions stay.
      delete (r.propagation as { samples?: unknown }).samples;
      whatIf.push({ variant: v.label, key, ...r });
    }
    result.whatIf = whatIf;

    // --- The periodic resync's cost at the largest N (a full verification of every volume).
    if (flags.extras) {
      await reset(pods);
      result.resync = await measureResync(await run(mainJs, [`--resync-seconds=${RESYNC_S}`]), pods.length);
    }

    // --- The admission webhook: pod-create latency with and without it, its RSS (bench/webhook.ts).
    if (flags.extras && !flags['agent-ref']) { // the webhook of the work tree only
      say('webhook: 1000 pod creates each way at 50/s');
      const wh = await benchWebhook(cluster, { creates: 1000, rate: 50, workDir: work, main: mainJs });
      printWebhook(wh);
      result.webhook = wh;
    }

    result.loadAfter = loadavg();
    result.wallS = round((nowMs() - t0) / 1000, 1);
    writeFileSync(flags.out, `${JSON.stringify(result, null, 2)}\n`);
    // The chart and tables from the file just written, as bench/rerender.ts and
    // test/packaging/charts.test.ts render them: the same bytes from the same JSON.
    const written = JSON.parse(readFileSync(flags.out, 'utf8')) as Results;
    writeFileSync(flags.chart, renderChart(written as never));
    say(`wrote ${path.relative(ROOT, flags.out)} and ${path.relative(ROOT, flags.chart)}`);
    // Only the full run's default output feeds the documentation's tables.
    if (path.resolve(flags.out) === DEFAULT_OUT) {
      const changed = updateDocs(ROOT, written);
      say(`tables: ${changed.length ? `updated ${changed.join(', ')}` : 'unchanged'}`);
    }
  } finally {
    for (const c of cleanups) await c().catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
  }
  // --- The KEP's syntax on the real kubelet: owner changes through the annotation beside label
  // changes of the same pods (bench/kubelet.ts, on a control plane and real node of its own).
  if (flags.extras && !flags['agent-ref']) {
    const missing = missingForRealNode();
    if (missing.length > 0) say(`kubelet: SKIPPED, no real node here (this machine lacks ${missing.join(', ')})`);
    else {
      say('kubelet: owner changes through the annotation beside label changes, read inside the containers of a real node');
      // Beside --out when it is not the default, so that a side run leaves bench/results/kubelet.json alone.
      const out = path.resolve(flags.out) === DEFAULT_OUT ? [] : [`--out=${flags.out.replace(/\.json$/, '')}-kubelet.json`];
      execFileSync(process.execPath, [path.join(ROOT, 'bench', 'kubelet.ts'), ...out, ...(flags['node-cpu-shares'] ? [`--node-cpu-shares=${flags['node-cpu-shares']}`] : [])], { stdio: 'inherit' });
    }
  }
}

/** One agent of an alternating pair: what the ratio target needs, and what explains it. */
function pairOf(r: Record<string, unknown>): PairRun['defaults'] {
  const p = r.propagation as { agentMs: { p99: number }; floorMs: { p99: number }; agentCpuPerEventUs: number; gc?: unknown; contention?: PairRun['defaults']['contention'] };
  return { p99: p.agentMs.p99, floorP99: p.floorMs.p99, ratio: round(p.agentMs.p99 / p.floorMs.p99, 2), cpuPerChangeUs: p.agentCpuPerEventUs, gc: p.gc, contention: p.contention, load: r.load as number[] };
}

/** CPU of the periodic full verification (--resync-seconds=5, three rounds in 15.5 s). */
async function measureResync(agent: AgentProcess, n: number): Promise<Record<string, unknown>> {
  const windowMs = 3 * RESYNC_S * 1000 + 500;
  await waitUntil(() => agent.ready(), 'agent ready');
  await sleep(RESYNC_S * 1000 / 2); // the start-up sync done, between two rounds
  const r0 = sample(agent.pid);
  const u0 = await agent.metric('ownerrefs_file_unchanged_total');
  await sleep(windowMs);
  const r1 = sample(agent.pid);
  const verified = (await agent.metric('ownerrefs_file_unchanged_total')) - u0;
  await agent.stop();
  const resyncs = verified / (3 * n);
  say(`resync at N=${n}: ${verified} files verified in ${windowMs / 1000} s (${resyncs} full resyncs), ${(cpuBetween(r0, r1) * 1000).toFixed(0)} ms CPU`);
  return { n, windowS: windowMs / 1000, filesVerified: verified, cpuS: round(cpuBetween(r0, r1)), cpuPerResyncS: round(cpuBetween(r0, r1) / resyncs), load: loadavg() };
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
