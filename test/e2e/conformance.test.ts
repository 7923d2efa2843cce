// Kubernetes' own downward API conformance specs, from its e2e suite at the control plane's
// pinned version, on the real node with the agent and the webhook installed, beside this
// project's specs for the KEP's item, written the same way ([ownerrefs.dev],
// localcluster/conformance/ownerrefs). One binary runs both (localcluster/conformance/build.sh:
// e2e.test, and the agnhost and busybox images it asks for, imported into the node's containerd
// since no registry can be reached). Its JUnit report is read: every focused spec ran and none
// failed or skipped itself.
//
// First without the webhook: ours must fail, each at its pod's creation (the API server alone
// refuses the field), so that their passing later is the product's doing. Then with the webhook,
// and last in admission.mode=policy: the webhook stopped and unregistered, the shipped
// MutatingAdmissionPolicies alone admitting the KEP's syntax.
//
// The suite wants every schedulable node Ready, so this file runs on the real node only; a
// machine that cannot run one skips it, saying why (support/realnode-e2e.ts).

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { installPolicies, servesPolicies, type InstalledPolicies } from '../support/admissionpolicy.ts';
import { apiStatus } from '../support/cluster.ts';
import { CONTAINERS, useRealNode } from '../support/realnode-e2e.ts';

const run = promisify(execFile);
const BUILD = path.join(import.meta.dirname, '..', '..', 'localcluster', 'conformance', 'build.sh');

/** Upstream's downward API specs, as the v1.36.3 suite names them, by group; none Serial, Disruptive or behind a feature. */
const UPSTREAM_GROUPS = [String.raw`\[sig-storage\] Downward API volume`, String.raw`\[sig-storage\] Projected downwardAPI`, String.raw`\[sig-node\] Downward API`] as const;
const OURS_FOCUS = String.raw`\[ownerrefs\.dev\]`;
/**
 * Upstream's and ours in three e2e.test processes at once, as upstream runs its suite in
 * parallel (none of these is Serial): a spec mostly waits on its pod, not on a core, so three
 * at once take about a third of the time. The counts below catch a spec no shard ran or two did.
 */
const SHARDS = [UPSTREAM_GROUPS[0], UPSTREAM_GROUPS[1], `${UPSTREAM_GROUPS[2]}|${OURS_FOCUS}`];
const SKIP = String.raw`\[Serial\]|\[Disruptive\]|\[Feature:`;
const UPSTREAM_SPECS = 33;
const OUR_SPECS = 7;
const OURS = '[ownerrefs.dev]';
if (!CONTAINERS) console.warn("NO CONFORMANCE RUN: Kubernetes' e2e suite wants every schedulable node Ready and this machine cannot run a real node (see NO REAL NODE above); test/e2e/conformance.test.ts is SKIPPED");

interface SpecResult {
  /** The JUnit name: "[It] <full text>", or a suite node's ("[SynchronizedBeforeSuite]"). */
  name: string;
  status: string;
  seconds: number;
  /** The <skipped message>: "skipped" for a spec the focus left out, "skipped - WHY" for one that skipped itself. */
  skipped?: string;
  /** The text of <failure> or <error>: the message and where it failed. */
  failure?: string;
}

const xmlText = (s: string) => s.replace(/&(#x[0-9a-fA-F]+|#\d+|lt|gt|amp|quot|apos);/g, (_, e: string) =>
  e[0] === '#' ? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : Number(e.slice(1))) : ({ lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" } as Record<string, string>)[e]!);

/** The test cases of a JUnit report as Ginkgo writes it (encoding/xml: no self-closed testcase, attributes in double quotes). */
function readJUnit(xml: string): SpecResult[] {
  return [...xml.matchAll(/<testcase\s([^>]*)>([\s\S]*?)<\/testcase>/g)].map(([, attrs, body]) => {
    const attr = Object.fromEntries([...attrs!.matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => [k!, xmlText(v!)]));
    const skipped = /<skipped\s+message="([^"]*)"/.exec(body!)?.[1];
    const failure = /<(failure|error)\b[^>]*>([\s\S]*?)<\/\1>/.exec(body!)?.[2];
    return { name: attr.name ?? '', status: attr.status ?? '', seconds: Number(attr.time ?? 0), skipped: skipped === undefined ? undefined : xmlText(skipped), failure: failure === undefined ? undefined : xmlText(failure) };
  });
}

interface SuiteRun {
  /** Specs that ran (focused and not skipped), by name. */
  ran: SpecResult[];
  failed: SpecResult[];
  /** Focused specs that skipped themselves, and suite nodes that did not pass. */
  unexpected: SpecResult[];
  log: string;
  seconds: number;
}

const children = new Set<ChildProcess>();
process.on('exit', () => { for (const c of children) c.kill('SIGKILL'); });

/** Runs e2e.test with `focus` (asynchronously: the API server reaches the kubelet through a proxy in this process) and reads its JUnit report. */
async function runSuite(bin: string, kubeconfig: string, focus: string, timeoutMs: number): Promise<SuiteRun> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-conformance-'));
  const logPath = path.join(dir, 'e2e.log');
  const out = openSync(logPath, 'w');
  const start = Date.now();
  const child = spawn(path.join(bin, 'e2e.test'), [
    `--kubeconfig=${kubeconfig}`, '--provider=skeleton', `--report-dir=${dir}`,
    `--ginkgo.focus=${focus}`, `--ginkgo.skip=${SKIP}`, '--ginkgo.no-color', '--ginkgo.v', '--ginkgo.timeout=15m',
  ], { stdio: ['ignore', out, out] });
  children.add(child);
  closeSync(out);
  const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
  const code = await new Promise<number | null>((resolve, reject) => { child.once('error', reject); child.once('exit', resolve); }).finally(() => { clearTimeout(timer); children.delete(child); });
  const seconds = Math.round((Date.now() - start) / 1000);
  const log = readFileSync(logPath, 'utf8');
  const report = path.join(dir, 'junit_01.xml');
  if (!existsSync(report)) throw new Error(`e2e.test exited ${code} after ${seconds} s without a JUnit report; its log ends:\n${log.slice(-6000)}`);
  const cases = readJUnit(readFileSync(report, 'utf8'));
  rmSync(dir, { recursive: true, force: true });
  const specs = cases.filter((c) => c.name.startsWith('[It] '));
  const focused = specs.filter((c) => c.skipped !== 'skipped');
  return {
    ran: focused.filter((c) => c.status !== 'skipped' && c.status !== 'pending'),
    failed: focused.filter((c) => c.failure !== undefined || !['passed', 'skipped'].includes(c.status)),
    unexpected: [...focused.filter((c) => c.status === 'skipped' || c.status === 'pending'), ...cases.filter((c) => !c.name.startsWith('[It] ') && !['passed', 'skipped'].includes(c.status))],
    log, seconds,
  };
}

/** runSuite for each focus at once, their results together; the log holds the tail of each shard that had a problem (of every shard when none had). */
async function runShards(bin: string, kubeconfig: string, focuses: readonly string[], timeoutMs: number): Promise<SuiteRun> {
  const runs = await Promise.all(focuses.map((focus) => runSuite(bin, kubeconfig, focus, timeoutMs)));
  const troubled = runs.filter((r) => r.failed.length + r.unexpected.length > 0);
  return {
    ran: runs.flatMap((r) => r.ran), failed: runs.flatMap((r) => r.failed), unexpected: runs.flatMap((r) => r.unexpected),
    log: (troubled.length > 0 ? troubled : runs).map((r) => `=== shard ${focuses[runs.indexOf(r)]} ===\n${r.log.slice(-8000)}`).join('\n'),
    seconds: Math.max(...runs.map((r) => r.seconds)),
  };
}

const summary = (specs: SpecResult[]) => specs.map((s) => `- ${s.name} (${s.status})${s.skipped ? `: ${s.skipped}` : ''}${s.failure ? `\n${s.failure.trim().split('\n').slice(0, 25).map((l) => `    ${l}`).join('\n')}` : ''}`).join('\n');

describe.runIf(CONTAINERS)("Kubernetes' downward API conformance specs and ours for ownerReferences, on the real node", () => {
  const e = useRealNode('conformance');
  let bin: string;
  let webhook: WebhookProcess | undefined;

  beforeAll(async () => {
    // A cache hit once scripts/setup.sh built it; cold, a few minutes.
    bin = (await run('bash', [BUILD], { maxBuffer: 1 << 20 })).stdout.trim().split('\n').pop()!;
    for (const line of readFileSync(path.join(bin, 'images'), 'utf8').trim().split('\n')) {
      const [archive, name] = line.split(' ') as [string, string];
      const imported = await e.node.importImage!(path.join(bin, archive));
      expect(imported, `ctr images import ${archive}`).toContain(name);
    }
  }, 900_000);
  let policies: InstalledPolicies | undefined;
  afterAll(async () => { await webhook?.stop(); await policies?.remove(); });

  it('without the webhook, each of our specs fails at its pod\'s creation: the API server alone refuses the field', async () => {
    const registered = await e.kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: 'ownerrefs.dev' }).then(() => 200, (err: unknown) => apiStatus(err));
    expect(registered, 'no webhook is registered yet').toBe(404);
    const r = await runSuite(bin, e.cp.kubeconfigPath, OURS_FOCUS, 300_000);
    console.log(`without the webhook: ${r.ran.length} of our specs ran in ${r.seconds} s, ${r.failed.length} failed (as they must):\n${summary(r.failed)}`);
    expect(r.ran.map((s) => s.name.startsWith(`[It] ${OURS} `)), 'only ours ran').toEqual(Array(OUR_SPECS).fill(true));
    expect(summary(r.unexpected)).toBe('');
    expect(r.failed.map((s) => s.name)).toEqual(r.ran.map((s) => s.name));
    for (const s of r.failed) expect(s.failure, s.name).toMatch(/Error creating Pod: .* Invalid value: "metadata\.ownerReferences": error converting fieldPath: field label not supported/);
  }, 360_000);

  it(`with the webhook, upstream's ${UPSTREAM_SPECS} downward API specs and our ${OUR_SPECS} all pass`, async () => {
    webhook = await startWebhook(e.kc, e.node.workDir);
    const r = await runShards(bin, e.cp.kubeconfigPath, SHARDS, 600_000);
    const ours = r.ran.filter((s) => s.name.startsWith(`[It] ${OURS} `));
    console.log(`with the webhook: ${r.ran.length} specs ran in ${r.seconds} s (upstream ${r.ran.length - ours.length}, ours ${ours.length}), ${r.failed.length} failed; ours:\n` +
      ours.map((s) => `- ${s.name.slice(5)} (${s.status}, ${s.seconds.toFixed(1)} s)`).join('\n'));
    const problems = [...r.failed, ...r.unexpected];
    if (problems.length > 0) console.error(`=== specs that failed or skipped themselves ===\n${summary(problems)}\n=== the e2e.test log ends ===\n${r.log}`);
    expect(summary(problems)).toBe('');
    expect({ upstream: r.ran.length - ours.length, ours: ours.length }).toEqual({ upstream: UPSTREAM_SPECS, ours: OUR_SPECS });
  }, 660_000);

  it(`in policy mode, with no webhook process or configuration, upstream's ${UPSTREAM_SPECS} and our ${OUR_SPECS} all pass`, async (ctx) => {
    if (!(await servesPolicies(e.kc))) {
      // Before 1.36 (OWNERREFS_K8S=1.3x) the webhook is the way in: admission.mode=auto picks it.
      console.warn('SKIPPED: this API server does not serve MutatingAdmissionPolicy v1 (GA in 1.36), so policy mode cannot be installed here');
      ctx.skip();
    }
    const stopped = webhook;
    webhook = undefined;
    await stopped?.remove();
    const registered = await e.kc.makeApiClient(AdmissionregistrationV1Api).listMutatingWebhookConfiguration();
    expect(registered.items.map((h) => h.metadata!.name), 'no webhook is registered').toEqual([]);
    policies = await installPolicies(e.kc, e.ns);
    const r = await runShards(bin, e.cp.kubeconfigPath, SHARDS, 600_000);
    const ours = r.ran.filter((s) => s.name.startsWith(`[It] ${OURS} `));
    console.log(`in policy mode: ${r.ran.length} specs ran in ${r.seconds} s (upstream ${r.ran.length - ours.length}, ours ${ours.length}), ${r.failed.length} failed`);
    const problems = [...r.failed, ...r.unexpected];
    if (problems.length > 0) {
      console.error(`=== specs that failed or skipped themselves ===\n${summary(problems)}\n=== the e2e.test log ends ===\n${r.log}`);
      // Ours fail when a value is late or wrong: what the agent did for the spec's pods.
      const mentions = e.agent.logs().split('\n').filter((l) => /ownerrefs-(follow|env|volume|projected)-/.test(l) && !/"level":20/.test(l));
      console.error(`=== the agent ===\n${await e.agent.report()}\n${mentions.slice(-60).join('\n')}`);
    }
    expect(summary(problems)).toBe('');
    expect({ upstream: r.ran.length - ours.length, ours: ours.length }).toEqual({ upstream: UPSTREAM_SPECS, ours: OUR_SPECS });
  }, 720_000);
});
