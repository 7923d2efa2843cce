// What admitting the KEP's syntax costs a pod's creation, each way, in one run against the
// real API server: no admission (two floors: the same pods without the fields, and the KEP
// pods already in the form admission stores, annotation included, so that the object stored is
// the same size), the MutatingAdmissionPolicies (KEP pods, and plain pods in the namespaces they
// bind, which they match and leave alone), the webhook (KEP pods), and a policy of the least work
// (stored-form pods: the price of any mutating policy). Each way has a namespace of its own,
// selected by the policies' binding and the webhook's configuration, so nothing is installed
// between rounds: the rounds interleave the six, so machine noise falls on all of them, and
// each round's p50 minus its floor's in the same round is one pair (KEP pods against the stored
// form, plain pods against plain ones). Creates are open-loop at
// each rate (bench/support/webhookpods.ts).
//
//   npm run bench:admission                                  rates 50 and 200/s, 6 rounds each
//   npm run bench:admission -- --rates=20 --rounds=1 --round=20   (bench:admission:smoke, in CI)
//
// Beside the latency, the API server's own clock: the time it spent in each arm's admission
// plugin per pod (its STABLE histogram apiserver_admission_controller_admission_duration_seconds,
// summed over the arm's creates), less the floor's. That is the way's own cost in the request,
// without etcd's, the network's and the client's time, whose noise on this machine is larger
// than the cost itself. Other creates of the same seconds (the scheduler's events) count in, so
// it bounds the pods' share from above. And the share of the Pod policy's evaluations within
// 1 ms, from the policy's own histogram (apiserver_mutating_admission_policy_check_duration_seconds),
// and what every pod's creation pays in the ValidatingAdmissionPolicies every install has.
//
// The webhook runs here on the API server's two cores (on a cluster it has nodes of its own),
// which weighs against it; the policy runs inside the API server wherever it is.
// Results: bench/results/admission.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdmissionregistrationV1Api, CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { admissionPolicies, policyName } from '../agent/admission/policy/policy.ts';
import { WEBHOOK_CONFIG_NAME } from '../projections/names.ts';
import { startWebhook } from '../localcluster/webhookproc.ts';
import { startBenchCluster, type BenchCluster } from './support/cluster.ts';
import { TMP, buildAgent } from './support/agent.ts';
import { loadavg, machine } from './support/machine.ts';
import { dist, round, type Dist } from './support/stats.ts';
import { createAt, kepPod, plain } from './support/webhookpods.ts';
import { leastWorkPolicy, pluginSeconds, policyChecks, stored } from './support/admissionarms.ts';
import { NODE_FLAGS } from '../agent/config.ts';

const ARM_LABEL = 'ownerrefs.dev/bench-admission';
/**
 * The six ways, each in its namespace, with the form of its pods: `kep` in the syntax, `plain`
 * without the fields, `stored` as admission stores a KEP pod (no admission needed), and the
 * floor each is held to.
 */
const ARMS = [
  { name: 'floor', ns: 'adm-none', form: 'plain', floor: 'floor' },
  { name: 'stored', ns: 'adm-none', form: 'stored', floor: 'stored' },
  { name: 'policy', ns: 'adm-policy', form: 'kep', floor: 'stored' },
  { name: 'policyPlain', ns: 'adm-policy', form: 'plain', floor: 'floor' },
  { name: 'webhook', ns: 'adm-webhook', form: 'kep', floor: 'stored' },
  { name: 'minimalPolicy', ns: 'adm-minimal', form: 'stored', floor: 'stored' },
] as const;
type Arm = (typeof ARMS)[number]['name'];
type Added = 'policy' | 'policyPlain' | 'webhook' | 'minimalPolicy';
const ADDED: readonly Added[] = ['policy', 'policyPlain', 'webhook', 'minimalPolicy'];
/** The admission plugin each added way runs in (its name in the API server's metrics). */
const PLUGIN: Record<Added, string> = { policy: 'MutatingAdmissionPolicy', policyPlain: 'MutatingAdmissionPolicy', webhook: 'MutatingAdmissionWebhook', minimalPolicy: 'MutatingAdmissionPolicy' };
/** The plugin of the ValidatingAdmissionPolicies every install has (the agent's and the annotation writers'): what every pod's creation pays. */
const VALIDATING = 'ValidatingAdmissionPolicy';

const MINIMAL_POLICY = 'bench-minimal.ownerrefs.dev';

/** The Pod policy's evaluations: in all, and within 1 ms. */
const evaluations = (body: string) => { const c = policyChecks(body, policyName('pods')); return { all: c.count, within1ms: c.within1ms }; };

export interface RateResult {
  rate: number;
  /** Each way's latency over all its creates at this rate, ms. */
  all: Record<Arm, Dist>;
  /** Per round: each way's p50 minus its floor's in the same round, ms (one pair each). */
  rounds: Record<Added, number>[];
  /** The added p50 over the rounds: min, median, max, ms. */
  addedP50: Record<Added, { min: number; median: number; max: number }>;
  /** Per round: the API server's time in the way's admission plugin per pod, less its floor's in the same plugin, ms. */
  inServerRounds: Record<Added, number>[];
  /** That over the rounds: min, median, max, ms. */
  inServerAdded: Record<Added, { min: number; median: number; max: number }>;
  /** Per round, over every way's creates: the API server's time in the ValidatingAdmissionPolicies per pod, ms: min, median, max. */
  validatingPerPod: { min: number; median: number; max: number };
  /** Of the Pod policy's evaluations (KEP pods), the share its histogram puts within 1 ms, and how many it counted. */
  policyEvaluations: { within1ms: number; count: number };
}

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]!; };

async function setUp(kc: KubeConfig, workDir: string, main: string): Promise<{ owners: Record<string, { name: string; uid: string }>; stop(): Promise<void> }> {
  const core = kc.makeApiClient(CoreV1Api);
  const owners: Record<string, { name: string; uid: string }> = {};
  for (const ns of new Set(ARMS.map((a) => a.ns))) {
    await core.createNamespace({ body: { metadata: { name: ns, labels: { [ARM_LABEL]: ns } } } });
    // Each namespace's pods are owned by a ConfigMap of their own namespace (the garbage collector leaves them).
    const cm = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'owner' } } });
    owners[ns] = { name: 'owner', uid: cm.metadata!.uid! };
  }
  const objects = KubernetesObjectApi.makeApiClient(kc);
  for (const o of admissionPolicies({ namespaceSelector: { matchLabels: { [ARM_LABEL]: 'adm-policy' } } })) await objects.create(o as KubernetesObject);
  for (const o of leastWorkPolicy(MINIMAL_POLICY, { matchLabels: { [ARM_LABEL]: 'adm-minimal' } })) await objects.create(o);
  await core.createNamespace({ body: { metadata: { name: 'ownerrefs-system' } } }).catch(() => undefined);
  const webhook = await startWebhook(kc, workDir, { main, nodeFlags: NODE_FLAGS });
  // The webhook's configuration, narrowed to its arm's namespace.
  const reg = kc.makeApiClient(AdmissionregistrationV1Api);
  const cfg = await reg.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIG_NAME });
  for (const w of cfg.webhooks ?? []) w.namespaceSelector = { matchLabels: { [ARM_LABEL]: 'adm-webhook' } };
  await reg.replaceMutatingWebhookConfiguration({ name: WEBHOOK_CONFIG_NAME, body: cfg });
  // Both are enforced once the API server's informers have them: wait until a dry run of each is rewritten.
  const rewritten = async (ns: string) => {
    // Refused (422) until then: the API server alone does not know the field.
    const p = await core.createNamespacedPod({ namespace: ns, body: kepPod(0, owners[ns]!), dryRun: 'All' }).catch(() => undefined);
    return p?.metadata?.annotations?.['ownerrefs.dev/owner-references'] !== undefined;
  };
  const minimalEnforced = async () => (await core.createNamespacedPod({ namespace: 'adm-minimal', body: stored(kepPod(0, owners['adm-minimal']!)), dryRun: 'All' }))
    .metadata?.annotations?.['bench.example/minimal'] !== undefined;
  for (let i = 0; !(await rewritten('adm-policy') && await rewritten('adm-webhook') && await minimalEnforced()); i++) {
    if (i > 300) throw new Error('the policies or the webhook were not enforced within 30 s');
    await sleep(100);
  }
  // The stored floor is what the policy stores: held to a dry run, or the pairs compare unlike objects.
  const viaPolicy = await core.createNamespacedPod({ namespace: 'adm-policy', body: kepPod(0, owners['adm-policy']!), dryRun: 'All' });
  const ours = stored(kepPod(0, owners['adm-policy']!));
  const form = (p: V1Pod) => JSON.stringify([p.metadata!.annotations, p.spec!.containers[0]!.env!.map((v) => v.valueFrom?.fieldRef?.fieldPath), p.spec!.volumes![0]!.downwardAPI!.items!.map((i) => i.fieldRef?.fieldPath)]);
  if (form(viaPolicy) !== form(ours)) throw new Error(`the stored form differs from what the policy stores: ${form(ours)} against ${form(viaPolicy)}`);
  return { owners, stop: async () => { await webhook.stop(); } };
}

export async function benchAdmission(cluster: BenchCluster, opts: { rates: number[]; rounds: number; round: number; workDir: string; main: string }): Promise<RateResult[]> {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.cp.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const { owners, stop } = await setUp(kc, opts.workDir, opts.main);
  const out: RateResult[] = [];
  let serial = 0;
  try {
    for (const rate of opts.rates) {
      const all: Record<string, number[]> = Object.fromEntries(ARMS.map((a) => [a.name, []]));
      const rounds: RateResult['rounds'] = [];
      const inServerRounds: RateResult['inServerRounds'] = [];
      const evals = { all: 0, within1ms: 0 };
      const validating: number[] = [];
      for (let r = 0; r < opts.rounds; r++) {
        const p50: Record<string, number> = {};
        // ms per pod in each plugin, by arm.
        const inServer: Record<string, Record<string, number>> = {};
        // The order rotates each round, so that no way always follows another.
        for (const arm of ARMS.map((_, i) => ARMS[(i + r) % ARMS.length]!)) {
          const pods: V1Pod[] = Array.from({ length: opts.round }, () => {
            const pod = kepPod(serial++, owners[arm.ns]!);
            return arm.form === 'kep' ? pod : arm.form === 'stored' ? stored(pod) : plain(pod);
          });
          const before = await cluster.apiServerMetrics();
          const ms = await createAt(core, pods, rate, arm.ns);
          const after = await cluster.apiServerMetrics();
          all[arm.name]!.push(...ms);
          p50[arm.name] = dist(ms).p50;
          inServer[arm.name] = Object.fromEntries([...new Set([...Object.values(PLUGIN), VALIDATING])].map((pl) => [pl, (pluginSeconds(after, pl) - pluginSeconds(before, pl)) * 1000 / pods.length]));
          if (arm.name === 'policy') {
            const [b, a] = [evaluations(before), evaluations(after)];
            evals.all += a.all - b.all;
            evals.within1ms += a.within1ms - b.within1ms;
          }
        }
        validating.push(round(median(ARMS.map((a) => inServer[a.name]![VALIDATING]!))));
        const counted: [string, string][] = [...ADDED.map((k): [string, string] => [k, PLUGIN[k]]), ['floor', VALIDATING]];
        for (const [k, pl] of counted) if (!(inServer[k]![pl]! > 0)) throw new Error(`the API server counted no time in ${pl} for ${k}: its metrics are not the ones this benchmark reads`);
        const floorOf = (k: Added) => ARMS.find((a) => a.name === k)!.floor;
        rounds.push(Object.fromEntries(ADDED.map((k) => [k, round(p50[k]! - p50[floorOf(k)]!)])) as Record<Added, number>);
        inServerRounds.push(Object.fromEntries(ADDED.map((k) => [k, round(inServer[k]![PLUGIN[k]]! - inServer[floorOf(k)]![PLUGIN[k]]!)])) as Record<Added, number>);
        // Pods never scheduled, deleted between rounds (not timed), so that etcd and the watch cache stay small.
        for (const ns of new Set(ARMS.map((a) => a.ns))) await core.deleteCollectionNamespacedPod({ namespace: ns, gracePeriodSeconds: 0 });
        await sleep(1000);
      }
      const spread = (rs: Record<Added, number>[], k: Added) => { const xs = rs.map((x) => x[k]); return { min: Math.min(...xs), median: median(xs), max: Math.max(...xs) }; };
      if (evals.all === 0) throw new Error(`the API server counted no evaluation of ${policyName('pods')}: its metrics are not the ones this benchmark reads`);
      out.push({ rate, all: Object.fromEntries(Object.entries(all).map(([k, v]) => [k, dist(v)])) as Record<Arm, Dist>, rounds,
        addedP50: Object.fromEntries(ADDED.map((k) => [k, spread(rounds, k)])) as RateResult['addedP50'],
        inServerRounds, inServerAdded: Object.fromEntries(ADDED.map((k) => [k, spread(inServerRounds, k)])) as RateResult['inServerAdded'],
        validatingPerPod: { min: Math.min(...validating), median: median(validating), max: Math.max(...validating) },
        policyEvaluations: { within1ms: round(evals.within1ms / evals.all), count: evals.all } });
    }
  } finally {
    await stop();
  }
  return out;
}

function print(results: RateResult[]): void {
  for (const r of results) {
    console.log(`${r.rate}/s: p50 floor ${r.all.floor.p50} ms, stored form ${r.all.stored.p50}, policy ${r.all.policy.p50}, policy (plain pods) ${r.all.policyPlain.p50}, webhook ${r.all.webhook.p50}, minimal policy ${r.all.minimalPolicy.p50}`);
    for (const k of ADDED) {
      const s = r.addedP50[k];
      const t = r.inServerAdded[k];
      console.log(`  added p50, ${k} (against ${ARMS.find((a) => a.name === k)!.floor}): median ${s.median} ms (min ${s.min}, max ${s.max}, ${r.rounds.length} pairs); ` +
        `in the API server's ${PLUGIN[k]} per pod: median ${t.median} ms (min ${t.min}, max ${t.max})`);
    }
    console.log(`  every pod, in the ValidatingAdmissionPolicies: median ${r.validatingPerPod.median} ms (min ${r.validatingPerPod.min}, max ${r.validatingPerPod.max})`);
    console.log(`  ${policyName('pods')}: ${Math.round(r.policyEvaluations.within1ms * 100)}% of ${r.policyEvaluations.count} evaluations within 1 ms`);
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: {
    rates: { type: 'string', default: '50,200' }, rounds: { type: 'string', default: '6' }, round: { type: 'string', default: '100' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'admission.json') },
  } });
  const workDir = path.join(TMP, `admission-${process.pid}`);
  mkdirSync(workDir, { recursive: true });
  const cluster = await startBenchCluster('bench-node', workDir);
  try {
    const results = await benchAdmission(cluster, { rates: values.rates.split(',').map(Number), rounds: Number(values.rounds), round: Number(values.round), workDir,
      main: buildAgent(undefined, 'webhook').main });
    print(results);
    mkdirSync(path.dirname(values.out), { recursive: true });
    writeFileSync(values.out, JSON.stringify({ machine: machine(), versions: cluster.versions, loadavg: loadavg(), admission: results }, null, 2) + '\n');
  } finally {
    await cluster.stop();
  }
}
