// `npm run soak [-- --minutes=30 --pods=50 --rate=20 --node-flags='--some-v8-flag' --out=FILE]`: bounded random churn against
// the local control plane and the compiled agent, sampling the agent's RSS and open file descriptors. At the
// end every file must be correct, and RSS and fds must be flat (not growing with time).
// Results go to bench/results/soak.json; exit code 1 if a check fails.

import { existsSync, readdirSync, readFileSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { V1ConfigMap, V1Pod } from '@kubernetes/client-node';
import { NODE_FLAGS } from '../agent/config.ts';
import { FILES, project } from '../projections/index.ts';
import { mergePatch } from '../localcluster/patch.ts';
import { waitFor } from '../localcluster/wait.ts';
import { buildAgent } from '../bench/support/agent.ts';
import { startLocalCluster } from './localcluster.ts';

const { values } = parseArgs({ options: { minutes: { type: 'string', default: '30' }, pods: { type: 'string', default: '50' }, rate: { type: 'string', default: '20' },
  // Added after the agent's NODE_FLAGS, to try a V8 setting under churn; --out elsewhere than bench/results/soak.json.
  'node-flags': { type: 'string', default: '' }, out: { type: 'string' } } });
const MINUTES = Number(values.minutes);
const PODS = Number(values.pods);
const RATE = Number(values.rate); // operations per second
const NS = 'default';
const t0 = Date.now();
const say = (msg: string) => process.stdout.write(`${((Date.now() - t0) / 1000).toFixed(0).padStart(6)}s  ${msg}\n`);
const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

/**
 * RSS (split into anonymous and file-backed) and fds from /proc; the JS heap from the agent's
 * own metrics: used (a leak shows there first), committed by V8, per space for the two that
 * grow on their own (old, code), and external (Buffers). From the memory map: resident V8
 * heap pages (anonymous 256 KiB mappings; more than V8 reports committed when it keeps
 * freed pages for reuse) and malloc's main arena ([heap]).
 */
async function sample(agent: { child: { pid?: number }; metric(name: string, labels?: string): Promise<number> }) {
  const pid = agent.child.pid!;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)![1]);
  const mb = (bytes: number) => Math.round(bytes / 104857.6) / 10;
  const space = (name: string) => agent.metric('ownerrefs_nodejs_heap_space_size_total_bytes', `space="${name}"`);
  return {
    t: Math.round((Date.now() - t0) / 1000), rssMb: Math.round(kb('VmRSS') / 102.4) / 10,
    anonMb: Math.round(kb('RssAnon') / 102.4) / 10, fileMb: Math.round(kb('RssFile') / 102.4) / 10,
    heapUsedMb: mb(await agent.metric('ownerrefs_nodejs_heap_size_used_bytes')),
    heapTotalMb: mb(await agent.metric('ownerrefs_nodejs_heap_size_total_bytes')),
    oldSpaceMb: mb(await space('old')), codeSpaceMb: mb(await space('code')),
    externalMb: mb(await agent.metric('ownerrefs_nodejs_external_memory_bytes')),
    ...mappings(pid), fds: readdirSync(`/proc/${pid}/fd`).length,
    writes: await agent.metric('ownerrefs_file_writes_total'), apiRequests: await agent.metric('ownerrefs_api_requests_total'),
  };
}

function mappings(pid: number): { v8PagesMb: number; mallocMainMb: number } {
  let v8 = 0;
  let main = 0;
  let kind: 'v8' | 'main' | undefined;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m) {
      const size = parseInt(m[2]!, 16) - parseInt(m[1]!, 16);
      kind = m[3] === '[heap]' ? 'main' : !m[3] && size === 256 * 1024 ? 'v8' : undefined;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && kind === 'v8') v8 += Number(rss[1]);
    if (rss && kind === 'main') main += Number(rss[1]);
  }
  return { v8PagesMb: Math.round(v8 / 102.4) / 10, mallocMainMb: Math.round(main / 102.4) / 10 };
}

async function main(): Promise<number> {
  // The agent as the image runs it: compiled JavaScript, NODE_ENV=production.
  const built = buildAgent(undefined, 'soak'); // not bench's "current": a bench run must not pull it from under us
  const nodeFlags = values['node-flags'].split(' ').filter(Boolean);
  const lc = await startLocalCluster({ node: 'soak-node', say, agentMain: built.main, agentEnv: { NODE_ENV: 'production' }, agentNodeFlags: nodeFlags });
  try {
    const { core, agent } = lc;
    const kubelet = lc.kubelet!; // the soak runs on the emulator
    const owners: V1ConfigMap[] = [];
    for (let i = 0; i < 10; i++) owners.push(await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: `soak-owner-${i}` } } }));
    const ref = (o: V1ConfigMap) => ({ apiVersion: 'v1', kind: 'ConfigMap', name: o.metadata!.name!, uid: o.metadata!.uid! });
    const podBody = (i: number, o: V1ConfigMap): V1Pod => ({
      metadata: { name: `soak-${i}`, labels: { churn: '0' }, annotations: { 'ownerrefs.dev/volume': 'podinfo' }, ownerReferences: [ref(o)] },
      spec: { nodeName: 'soak-node', terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] },
    });
    const pods = new Map<number, { pod: V1Pod; owner: V1ConfigMap }>();
    for (let i = 0; i < PODS; i++) {
      const owner = pick(owners);
      pods.set(i, { pod: await core.createNamespacedPod({ namespace: NS, body: podBody(i, owner) }), owner });
    }
    const want = (owner: V1ConfigMap) => project({ metadata: { ownerReferences: [ref(owner)] } }).find((f) => f.path === FILES.ownerReferences)!.bytes.toString('utf8');
    const fileOf = (pod: V1Pod) => path.join(kubelet.volumeDir(pod.metadata!.uid!, 'podinfo'), FILES.ownerReferences);
    const wrong = () => [...pods.values()].filter(({ pod, owner }) => { try { return readFileSync(fileOf(pod), 'utf8') !== want(owner); } catch { return true; } });
    await waitFor(() => wrong().length === 0, { timeoutMs: 120_000, describe: 'initial files' });
    say(`${PODS} pods projected; churning at ${RATE} ops/s for ${MINUTES} min`);

    const samples = [await sample(agent)];
    const ops = { owner: 0, label: 0, recreate: 0, selfheal: 0, failed: 0 };
    const deadline = t0 + MINUTES * 60_000;
    let nextSample = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const i = Math.floor(Math.random() * PODS);
      const entry = pods.get(i)!;
      const r = Math.random();
      try {
        if (r < 0.5) { // the controller story: owners change
          const owner = pick(owners);
          await core.patchNamespacedPod({ name: `soak-${i}`, namespace: NS, body: { metadata: { ownerReferences: [ref(owner)] } } }, mergePatch);
          entry.owner = owner;
          ops.owner++;
        } else if (r < 0.85) { // churn that must not cause writes
          await core.patchNamespacedPod({ name: `soak-${i}`, namespace: NS, body: { metadata: { labels: { churn: String(Date.now()) } } } }, mergePatch);
          ops.label++;
        } else if (r < 0.95) { // pod replaced
          await core.deleteNamespacedPod({ name: `soak-${i}`, namespace: NS, gracePeriodSeconds: 0 });
          await waitFor(() => core.readNamespacedPod({ name: `soak-${i}`, namespace: NS }).then(() => false, () => true));
          entry.pod = await core.createNamespacedPod({ namespace: NS, body: podBody(i, entry.owner) });
          ops.recreate++;
        } else { // the pod deletes its file
          rmSync(fileOf(entry.pod), { force: true });
          ops.selfheal++;
        }
      } catch {
        ops.failed++;
      }
      if (Date.now() >= nextSample) {
        samples.push(await sample(agent));
        nextSample += 15_000;
        const s = samples.at(-1)!;
        say(`rss ${s.rssMb} MiB (anon ${s.anonMb}: V8 pages ${s.v8PagesMb}, malloc ${s.mallocMainMb}; file ${s.fileMb}), heap used/committed ${s.heapUsedMb}/${s.heapTotalMb} MiB (old ${s.oldSpaceMb}, code ${s.codeSpaceMb}), external ${s.externalMb}, fds ${s.fds}, ops ${JSON.stringify(ops)}`);
      }
      await new Promise((res) => setTimeout(res, 1000 / RATE));
    }
    await waitFor(() => wrong().length === 0, { timeoutMs: 60_000, describe: 'files converge after churn' }).catch(() => undefined);
    const logFile = path.join(os.tmpdir(), `ownerrefs-soak-agent-${process.pid}.log`);
    writeFileSync(logFile, agent.logs());
    const stale = wrong();
    const left = stale.length;
    // Which, and how: a missing file and a stale one point at different parts of the agent.
    const wrongFiles = stale.map(({ pod, owner }) => {
      let now: string;
      try { now = readFileSync(fileOf(pod), 'utf8'); } catch (err) { now = `(${(err as NodeJS.ErrnoException).code})`; }
      // No volume directory means the kubelet emulator (the harness) never made it: not the agent.
      return { pod: pod.metadata!.name, uid: pod.metadata!.uid, want: owner.metadata!.name, now: now.slice(0, 200), volumeDirExists: existsSync(path.dirname(fileOf(pod))) };
    });
    samples.push(await sample(agent));
    // Flat: compare the mean of the second quarter with the last quarter (the first is warm-up).
    const q = Math.max(1, Math.floor(samples.length / 4));
    const mean = (xs: typeof samples, k: 'rssMb' | 'heapUsedMb' | 'fds') => xs.reduce((n, s) => n + s[k], 0) / xs.length;
    const early = samples.slice(q, 2 * q);
    const late = samples.slice(-q);
    const rssGrowth = mean(late, 'rssMb') / mean(early.length ? early : samples, 'rssMb') - 1;
    const heapGrowth = mean(late, 'heapUsedMb') / mean(early.length ? early : samples, 'heapUsedMb') - 1;
    const fdGrowth = mean(late, 'fds') - mean(early.length ? early : samples, 'fds');
    const writes = await agent.metric('ownerrefs_file_writes_total');
    // The agent's own series (not process/runtime ones): restarts, relists, failures by reason.
    const agentMetrics = (await agent.get('/metrics')).body.split('\n')
      .filter((l) => l.startsWith('ownerrefs_') && !/^ownerrefs_(nodejs|process)_/.test(l) && !l.includes('_bucket'));
    const requests = await agent.metric('ownerrefs_api_requests_total');
    const result = {
      date: new Date().toISOString(), unit: 'MiB (the *Mb fields)', minutes: MINUTES, pods: PODS, rate: RATE, ops, writes, apiRequests: requests,
      wrongFilesAtEnd: left, wrongFiles, agentLog: logFile, agentMetrics, rssGrowthPct: Math.round(rssGrowth * 1000) / 10, heapGrowthPct: Math.round(heapGrowth * 1000) / 10,
      fdGrowth: Math.round(fdGrowth * 10) / 10, nodeFlags: [...NODE_FLAGS, ...nodeFlags],
      machine: `${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`, samples,
    };
    const out = values.out ?? path.join(import.meta.dirname, '..', 'bench', 'results', 'soak.json');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
    const ok = left === 0 && rssGrowth < 0.2 && heapGrowth < 0.2 && fdGrowth < 5;
    say(`${ok ? 'PASS' : 'FAIL'}: ${left} wrong files; 2nd quarter -> last: RSS ${result.rssGrowthPct}%, JS heap ${result.heapGrowthPct}%, fds ${result.fdGrowth}; ` +
      `${writes} writes, ${requests} API requests; ${path.relative(process.cwd(), out)}`);
    return ok ? 0 : 1;
  } finally {
    await lc.stop();
  }
}

main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`soak failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
