// `npm run bench`: the agent against the real control plane at N pods per node.
// Measures start-up, propagation latency (with a bare watch client as the floor),
// unrelated churn, memory, CPU and API cost; writes bench/results/latest.json and a
// chart. See docs/PERFORMANCE.md for the method and the results.
//
//   npm run bench                          N = 100, 500, 1000 (~5 min on 2 cores)
//   npm run bench:smoke                    N = 20, for CI (no timing is asserted anywhere)
//   npm run bench -- --baseline-ref=REF    also measure the idle RSS of the agent at REF
//
// Flags: --sizes=100,500,1000 --out=FILE.json --chart=FILE.svg --baseline-ref=REF --profile

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { TMP, buildAgent, buildVariants, bundleAgent, fsType, startAgent, type RunningAgentProc } from './support/agent.ts';
import { renderChart } from './support/chart.ts';
import { startBenchCluster } from './support/cluster.ts';
import { ProbeProcess } from './support/ipc.ts';
import { measureN, waitUntil } from './support/measure.ts';
import { clearFiles, createPods, switchOwners, type BenchPod } from './support/pods.ts';
import { updateDoc, type Results } from './support/report.ts';
import { cpuBetween, sample } from './support/proc.ts';
import { gitState, loadavg, machine } from './support/machine.ts';
import { nowMs, round } from './support/stats.ts';

const ROOT = path.join(import.meta.dirname, '..');
const NODE = 'bench-node';
const DEFAULT_OUT = path.join(ROOT, 'bench/results/latest.json');
const SETTLE_MS = 3_000;
// The agent's periodic disk verification is switched off while measuring (it would
// land at random in a phase); its cost is measured on its own at the largest N.
const NO_RESYNC = ['--resync-seconds=3600'];

const { values: flags } = parseArgs({
  options: {
    sizes: { type: 'string', default: '100,500,1000' },
    out: { type: 'string', default: DEFAULT_OUT },
    chart: { type: 'string', default: path.join(ROOT, 'bench/results/latest.svg') },
    'baseline-ref': { type: 'string' },
    // Write a V8 CPU profile of each measured agent to bench/results/tmp/prof (slower).
    profile: { type: 'boolean', default: false },
    // Where volume directories live: tmpfs, like the documented `medium: Memory`
    // emptyDir, or the disk under the temporary directory (a default emptyDir).
    volumes: { type: 'string', default: 'memory' },
    // --no-extras: skip the what-if variants and the resync measurement (CI smoke).
    extras: { type: 'boolean', default: true },
  },
  allowNegative: true,
});
const sizes = flags.sizes.split(',').map(Number).sort((a, b) => a - b);
const t0 = nowMs();
const say = (msg: string) => process.stdout.write(`${((nowMs() - t0) / 1000).toFixed(1).padStart(6)}s  ${msg}\n`);

async function main(): Promise<void> {
  const result: Record<string, unknown> = {
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    date: new Date().toISOString(),
    machine: machine(),
    git: gitState(),
    loadBefore: loadavg(),
  };
  say(`building the agent (compiled JS, as the image runs it)${flags['baseline-ref'] ? ` and the baseline at ${flags['baseline-ref']}` : ''}`);
  const mainJs = buildAgent();
  const bundleJs = bundleAgent(mainJs);
  const baselineJs = flags['baseline-ref'] ? buildAgent(flags['baseline-ref']) : undefined;

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

    const mo = { say, quietCpuS: flags.profile ? 0.015 : 0.002 };
    const nodeArgs = flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(TMP, 'prof')}`] : [];
    const run = (main: string, extra: string[] = []) =>
      startAgent({ main, kubeconfig: cluster.agentKubeconfig, nodeName: NODE, kubeletRoot, args: [...NO_RESYNC, ...extra], nodeArgs });

    // --- Idle: no pod on the node has opted in.
    const idle: Record<string, unknown> = {};
    const variants: [string, string, string[]][] = [
      ['current (compiled JS)', mainJs, []],
      ['current (compiled JS, --max-semi-space-size=1)', mainJs, ['--max-semi-space-size=1']],
      ['current (TypeScript source)', path.join(ROOT, 'agent/main.ts'), []],
    ];
    if (bundleJs) variants.push(['current (bundled with rolldown)', bundleJs, []]);
    if (baselineJs) {
      variants.push([`baseline ${flags['baseline-ref']} (compiled JS)`, baselineJs, []]);
      variants.push([`baseline ${flags['baseline-ref']} (TypeScript source)`, path.join(path.dirname(path.dirname(path.dirname(baselineJs))), 'agent/main.ts'), []]);
      const bundled = bundleAgent(baselineJs);
      if (bundled) variants.push([`baseline ${flags['baseline-ref']} (bundled with rolldown)`, bundled, []]);
    }
    for (const [label, main, v8] of variants) {
      const a = await startAgent({ main, kubeconfig: cluster.agentKubeconfig, nodeName: NODE, kubeletRoot, args: NO_RESYNC, nodeArgs: v8 });
      await waitUntil(() => a.ready(), 'agent ready');
      await sleep(SETTLE_MS);
      const s = sample(a.pid);
      idle[label] = { rssMiB: round(s.rssMiB, 1), hwmMiB: round(s.hwmMiB, 1), startedMs: round(a.startedAt - a.spawnedAt, 1), load: loadavg() };
      say(`idle RSS ${label}: ${s.rssMiB.toFixed(1)} MiB (peak ${s.hwmMiB.toFixed(1)}), 'agent started' after ${(a.startedAt - a.spawnedAt).toFixed(0)} ms`);
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

    // --- What-if runs at the largest N (not the product as shipped; see docs/PERFORMANCE.md):
    // chokidar replaced by plain fs.watch, V8's young generation capped, and both.
    const whatIf: Record<string, unknown>[] = [];
    const hook = flags.extras ? buildVariants() : '';
    for (const [label, nodeArgs2] of !flags.extras ? [] : [
      ['dir watcher on plain fs.watch instead of chokidar', ['--import', hook]],
      ['V8 --max-semi-space-size=1', ['--max-semi-space-size=1']],
      ['both of the above', ['--import', hook, '--max-semi-space-size=1']],
    ] as const) {
      say(`what-if at N=${pods.length}: ${label}`);
      await reset(pods);
      const r = await measureN(pods.length, pods, cluster, floor, files,
        () => startAgent({ main: mainJs, kubeconfig: cluster.agentKubeconfig, nodeName: NODE, kubeletRoot, args: NO_RESYNC, nodeArgs: [...nodeArgs, ...nodeArgs2] }), mo);
      // Per-pod samples only for the product as shipped (the chart's); distributions stay.
      delete (r.propagation as { samples?: unknown }).samples;
      whatIf.push({ variant: label, ...r });
    }
    result.whatIf = whatIf;

    // --- The periodic resync's cost at the largest N (a full verification of every volume).
    if (flags.extras) {
      await reset(pods);
      result.resync = await measureResync(await run(mainJs, ['--resync-seconds=10']), pods.length);
    }

    result.loadAfter = loadavg();
    result.wallS = round((nowMs() - t0) / 1000, 1);
    writeFileSync(flags.out, `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(flags.chart, renderChart(result as never));
    say(`wrote ${path.relative(ROOT, flags.out)} and ${path.relative(ROOT, flags.chart)}`);
    // Only the full run's default output feeds the documentation's tables.
    if (path.resolve(flags.out) === DEFAULT_OUT) {
      updateDoc(path.join(ROOT, 'docs/PERFORMANCE.md'), result as unknown as Results);
      say('updated the tables in docs/PERFORMANCE.md');
    }
  } finally {
    for (const c of cleanups) await c().catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
  }
}

/** CPU of the periodic full verification (--resync-seconds=10, three rounds in 30.5 s). */
async function measureResync(agent: RunningAgentProc, n: number): Promise<Record<string, unknown>> {
  await waitUntil(() => agent.ready(), 'agent ready');
  await sleep(5_000);
  const r0 = sample(agent.pid);
  const u0 = await agent.metric('ownerrefs_file_unchanged_total');
  await sleep(30_500);
  const r1 = sample(agent.pid);
  const verified = (await agent.metric('ownerrefs_file_unchanged_total')) - u0;
  await agent.stop();
  const resyncs = verified / (3 * n);
  say(`resync at N=${n}: ${verified} files verified in 30.5 s (${resyncs} full resyncs), ${(cpuBetween(r0, r1) * 1000).toFixed(0)} ms CPU`);
  return { n, windowS: 30.5, filesVerified: verified, cpuS: round(cpuBetween(r0, r1)), cpuPerResyncS: round(cpuBetween(r0, r1) / resyncs), load: loadavg() };
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
