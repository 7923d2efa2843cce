// Where the Pod policy's time goes in the API server: the shipped pods.ownerrefs.dev beside
// copies of it with one part cut, and beside the policy of the least work, each bound to a
// namespace of its own, in rounds that interleave them (so machine noise falls on all). A what-if
// of the policy, not a product: each cut copy admits pods wrongly.
//
//   npm run bench:admission:parts                       8 rounds of 100 creates at 50/s
//   npm run bench:admission:parts -- --rounds=1 --round=10   (bench:admission:parts:smoke, in CI)
//
// Two clocks of the API server's, per pod: the time in its MutatingAdmissionPolicy plugin
// (everything a policy costs: matching, its matchConditions, the check, converting the object
// back), and the policy's own check (apiserver_mutating_admission_policy_check_duration_seconds:
// its patch evaluated, the object encoded, patched, decoded, converted and defaulted; not its
// matchConditions). Each cut's saving is paired with the shipped policy's in the same round.
// Results: bench/results/admission-parts.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { admissionPolicies, policyName } from '../agent/admission/policy/policy.ts';
import { startBenchCluster } from './support/cluster.ts';
import { TMP } from './support/agent.ts';
import { loadavg, machine } from './support/machine.ts';
import { round } from './support/stats.ts';
import { createAt, kepPod } from './support/webhookpods.ts';
import { leastWorkPolicy, pluginSeconds, policyChecks, stored } from './support/admissionarms.ts';
import { ANNOTATIONS } from '../projections/names.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const LABEL = 'ownerrefs.dev/bench-admission-parts';

/** The shipped Pod policy and its binding, renamed and bound to its variant's namespace. */
function shipped(name: string): Obj[] {
  const objs = structuredClone(admissionPolicies().filter((o) => (o as Obj).metadata.name === policyName('pods'))) as Obj[];
  for (const o of objs) {
    o.metadata.name = name;
    if (o.kind === 'MutatingAdmissionPolicyBinding') o.spec = { policyName: name, matchResources: { namespaceSelector: { matchLabels: { [LABEL]: name } } } };
  }
  return objs;
}
const variable = (policy: Obj, name: string) => {
  const v = policy.spec.variables.find((x: Obj) => x.name === name);
  if (!v) throw new Error(`the Pod policy has no variable ${name}: this benchmark's cuts are out of date`);
  return v;
};

/**
 * Each variant: its policy objects, and the form of the pods it admits (the KEP's syntax, or
 * the stored form for a policy that does not rewrite it, which the API server would refuse).
 */
const VARIANTS = {
  shipped: { objects: shipped, form: 'kep' },
  // Its matchConditions: what they cost a KEP pod (a plain pod pays them alone).
  withoutCondition: { objects: (n) => { const o = shipped(n); delete o[0]!.spec.matchConditions; return o; }, form: 'kep' },
  // The owners document built by string joins and escapes.
  withoutOwnersJson: { objects: (n) => { const o = shipped(n); variable(o[0]!, 'ownerReferences').expression = "'{}'"; return o; }, form: 'kep' },
  // The annotation operations (removes of authored values, the sets): one fixed add instead.
  withoutAnnotationOps: { objects: (n) => { const o = shipped(n); variable(o[0]!, 'annotationOps').expression =
    `[{'op': 'add', 'path': '/metadata/annotations/${ANNOTATIONS.ownerReferences.replace('/', '~1')}', 'value': '{}'}]`; return o; }, form: 'kep' },
  leastWork: { objects: (n) => leastWorkPolicy(n, { matchLabels: { [LABEL]: n } }) as Obj[], form: 'stored' },
  // The least work, matched by the shipped condition: the condition's price on its own.
  leastWorkWithCondition: { objects: (n) => { const o = leastWorkPolicy(n, { matchLabels: { [LABEL]: n } }) as Obj[];
    o[0]!.spec.matchConditions = shipped(n)[0]!.spec.matchConditions; return o; }, form: 'stored' },
  // The least work, matched by a condition that is always true: the price of any matchCondition.
  leastWorkWithTrueCondition: { objects: (n) => { const o = leastWorkPolicy(n, { matchLabels: { [LABEL]: n } }) as Obj[];
    o[0]!.spec.matchConditions = [{ name: 'always', expression: 'true' }]; return o; }, form: 'stored' },
} satisfies Record<string, { objects(name: string): Obj[]; form: 'kep' | 'stored' }>;
type Variant = keyof typeof VARIANTS;
const NAMES = Object.keys(VARIANTS) as Variant[];
/** The variant's namespace, and its policy's (and binding's) name. */
const ns = (v: Variant) => `parts-${v.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())}`;

export interface PartsResult {
  /** Per round, per variant: ms per pod in the MutatingAdmissionPolicy plugin, and in the policy's own check. */
  rounds: Record<Variant, { plugin: number; check: number }>[];
  /** Over the rounds, per variant: median (min to max), ms per pod. */
  plugin: Record<Variant, Spread>;
  check: Record<Variant, Spread>;
  /** Per cut: the shipped policy's plugin time less the cut's, paired by round. */
  saved: Record<Exclude<Variant, 'shipped'>, Spread>;
}
interface Spread { median: number; min: number; max: number }
const spread = (xs: number[]): Spread => { const s = [...xs].sort((a, b) => a - b); return { median: round(s[Math.floor((s.length - 1) / 2)]!), min: round(s[0]!), max: round(s.at(-1)!) }; };

export async function benchParts(kc: KubeConfig, metrics: () => Promise<string>, opts: { rounds: number; round: number; rate: number }): Promise<PartsResult> {
  const core = kc.makeApiClient(CoreV1Api);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const owners: Partial<Record<Variant, { name: string; uid: string }>> = {};
  for (const v of NAMES) {
    await core.createNamespace({ body: { metadata: { name: ns(v), labels: { [LABEL]: ns(v) } } } });
    const cm = await core.createNamespacedConfigMap({ namespace: ns(v), body: { metadata: { name: 'owner' } } });
    owners[v] = { name: 'owner', uid: cm.metadata!.uid! };
    for (const o of VARIANTS[v].objects(ns(v))) await objects.create(o as KubernetesObject);
  }
  const pod = (v: Variant, i: number): V1Pod => { const p = kepPod(i, owners[v]!); return VARIANTS[v].form === 'kep' ? p : stored(p); };
  // Each is enforced once a dry run of its pod is changed by it.
  for (const v of NAMES) {
    for (let i = 0; ; i++) {
      const p = await core.createNamespacedPod({ namespace: ns(v), body: pod(v, 0), dryRun: 'All' }).catch(() => undefined);
      const a = p?.metadata?.annotations ?? {};
      if (VARIANTS[v].form === 'kep' ? a[ANNOTATIONS.ownerReferences] !== undefined : a['bench.example/minimal'] !== undefined) break;
      if (i > 300) throw new Error(`the variant ${v} was not enforced within 30 s`);
      await sleep(100);
    }
  }
  const rounds: PartsResult['rounds'] = [];
  let serial = 1;
  for (let r = 0; r < opts.rounds; r++) {
    const row: Partial<PartsResult['rounds'][number]> = {};
    for (const v of NAMES.map((_, i) => NAMES[(i + r) % NAMES.length]!)) {
      const pods = Array.from({ length: opts.round }, () => pod(v, serial++));
      const before = await metrics();
      await createAt(core, pods, opts.rate, ns(v));
      const after = await metrics();
      const [b, a] = [policyChecks(before, ns(v)), policyChecks(after, ns(v))];
      if (a.count - b.count !== pods.length) throw new Error(`the API server counted ${a.count - b.count} checks of ${ns(v)} for ${pods.length} creates: its metrics are not the ones this benchmark reads`);
      row[v] = { plugin: round((pluginSeconds(after, 'MutatingAdmissionPolicy') - pluginSeconds(before, 'MutatingAdmissionPolicy')) * 1000 / pods.length),
        check: round((a.seconds - b.seconds) * 1000 / pods.length) };
      await core.deleteCollectionNamespacedPod({ namespace: ns(v), gracePeriodSeconds: 0 });
      await sleep(300);
    }
    rounds.push(row as PartsResult['rounds'][number]);
    console.log(`round ${r + 1}: ms per pod in the plugin (in the check): ${NAMES.map((v) => `${v} ${row[v]!.plugin} (${row[v]!.check})`).join(', ')}`);
  }
  const per = (f: (x: { plugin: number; check: number }) => number) => Object.fromEntries(NAMES.map((v) => [v, spread(rounds.map((x) => f(x[v])))])) as Record<Variant, Spread>;
  return { rounds, plugin: per((x) => x.plugin), check: per((x) => x.check),
    saved: Object.fromEntries(NAMES.filter((v) => v !== 'shipped').map((v) => [v, spread(rounds.map((x) => x.shipped.plugin - x[v].plugin))])) as Record<Exclude<Variant, 'shipped'>, Spread> };
}

if (import.meta.main) {
  const { values } = parseArgs({ options: {
    rounds: { type: 'string', default: '8' }, round: { type: 'string', default: '100' }, rate: { type: 'string', default: '50' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results', 'admission-parts.json') },
  } });
  const workDir = path.join(TMP, `admission-parts-${process.pid}`);
  mkdirSync(workDir, { recursive: true });
  const cluster = await startBenchCluster('bench-node', workDir);
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.cp.kubeconfigPath);
    const r = await benchParts(kc, () => cluster.apiServerMetrics(), { rounds: Number(values.rounds), round: Number(values.round), rate: Number(values.rate) });
    for (const v of NAMES) console.log(`${v}: plugin ${r.plugin[v].median} ms per pod (${r.plugin[v].min} to ${r.plugin[v].max}), check ${r.check[v].median} (${r.check[v].min} to ${r.check[v].max})` +
      (v === 'shipped' ? '' : `; shipped less this: ${r.saved[v].median} (${r.saved[v].min} to ${r.saved[v].max})`));
    mkdirSync(path.dirname(values.out), { recursive: true });
    writeFileSync(values.out, JSON.stringify({ machine: machine(), versions: cluster.versions, loadavg: loadavg(), rate: Number(values.rate), perRound: Number(values.round), ...r }, null, 2) + '\n');
  } finally {
    await cluster.stop();
  }
}
