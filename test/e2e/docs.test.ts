// Every command the user docs show, run as written against the local cluster with the product
// installed (support/docblocks.ts says how blocks are read and marked), and every manifest in
// examples/ applied as written, the commands of its comment run, its pods Ready.
//
// The installation is the chart's rendering with the harness's two patches
// (support/installed.ts) and the webhook as a process registered by URL (no Service routing
// here): the pages' own install commands are run as dry runs, as they say. Each page and each
// example runs in a namespace of its own (the kubeconfig's default), so that what one leaves
// cannot break another. Commands run through the asynchronous execFile: exec and logs reach
// the kubelet through a proxy in this process.

import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apply } from '../../localcluster/agentproc.ts';
import { controlPlaneBinaries } from '../../localcluster/controlplane/controlplane.ts';
import { freePort, startWebhook, type WebhookProcess } from '../../localcluster/webhookproc.ts';
import { CHART, helmBin } from '../../scripts/gen-manifests.ts';
import { asDryRun, consoleSteps, exampleCommands, outputMatches, ROOT, shellBlocks, userDocs, type Block } from '../support/docblocks.ts';
import { readyAgent, rendering } from '../support/installed.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';

const BLOCK_TIMEOUT_MS = 180_000;
/** The image the examples name; the node has no registry, so the local busybox is tagged so. */
const EXAMPLE_IMAGE = 'docker.io/library/busybox:1.37';

const examples = (dir = 'examples'): string[] => readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((d) =>
  d.isDirectory() ? examples(path.join(dir, d.name)) : d.name.endsWith('.yaml') ? [path.join(dir, d.name)] : []).sort();

describe.runIf(CONTAINERS)('the docs\' commands and the examples, run as written on the local cluster', () => {
  const e = useRealNode('docs', { agent: false });
  let webhook: WebhookProcess | undefined;
  let bin: string;
  let env: NodeJS.ProcessEnv;
  let work: string;

  /** `script` in bash from the repository root, with the kubeconfig whose default namespace is `ns`. */
  const sh = (script: string, ns: string, timeout = BLOCK_TIMEOUT_MS) => new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile('bash', ['-eo', 'pipefail', '-c', script], { cwd: ROOT, timeout, maxBuffer: 1 << 24, env: { ...env, KUBECONFIG: kubeconfigFor(ns) } },
      (err, out, errOut) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out, err: errOut }));
  });
  const kubeconfigs = new Map<string, string>();
  const kubeconfigFor = (ns: string) => kubeconfigs.get(ns)!;
  const namespace = async (ns: string) => {
    const file = path.join(work, `kubeconfig-${ns}`);
    copyFileSync(e.cp.kubeconfigPath, file);
    kubeconfigs.set(ns, file);
    await e.core.createNamespace({ body: { metadata: { name: ns } } });
    await e.waitFor(() => e.core.readNamespacedServiceAccount({ name: 'default', namespace: ns }), `the default ServiceAccount of ${ns}`);
    execFileSync(path.join(bin, 'kubectl'), ['config', 'set-context', '--current', `--namespace=${ns}`], { env: { ...process.env, KUBECONFIG: file } });
  };

  beforeAll(async () => {
    execFileSync('mount', ['--make-rshared', '/']);
    work = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-docs-')); // for the whole file: every test's kubeconfig lives here
    bin = await controlPlaneBinaries(); // kubectl
    // ownerrefs-agent as a user with the image has it on PATH: this checkout's, with the project's Node.
    const shims = path.join(work, 'bin');
    mkdirSync(shims);
    writeFileSync(path.join(shims, 'ownerrefs-agent'), `#!/bin/sh\nexec ${process.execPath} ${path.join(ROOT, 'agent', 'main.ts')} "$@"\n`);
    chmodSync(path.join(shims, 'ownerrefs-agent'), 0o755);
    env = { ...process.env, PATH: [shims, path.join(ROOT, 'kubectl-plugin'), bin, path.dirname(helmBin()), process.env.PATH].join(':') };
    const run = (cmd: string, args: string[]) => new Promise<string>((resolve, reject) =>
      execFile(cmd, args, { maxBuffer: 1 << 24 }, (err, out) => (err ? reject(err) : resolve(out))));
    const archive = (await run('bash', [path.join(ROOT, 'localcluster', 'image', 'build.sh')])).trim().split('\n').pop()!;
    await e.node.importImage!(archive);
    await e.node.tagImage!(IMAGES.busybox, EXAMPLE_IMAGE);
  }, 900_000);
  afterAll(async () => { await webhook?.stop(); if (work) rmSync(work, { recursive: true, force: true }); });

  const where = (b: Block, extra = '') => `${b.file}:${b.line}${extra}`;
  const runBlock = async (b: Block, ns: string) => {
    if (b.lang === 'sh') {
      const r = await sh(b.how === 'dry-run' ? asDryRun(b.body) : b.body, ns);
      expect(r.code, `${where(b)} exited ${r.code}\n--- block\n${b.body}\n--- stdout\n${r.out}\n--- stderr\n${r.err}`).toBe(0);
      return;
    }
    for (const step of consoleSteps(b.body)) {
      const r = await sh(step.command, ns);
      expect(r.code, `${where(b)}: $ ${step.command} exited ${r.code}\n${r.err}`).toBe(0);
      expect(outputMatches(step.expected, r.out), `${where(b)}: $ ${step.command}\n--- shown\n${step.expected.join('\n')}\n--- printed\n${r.out}`).toBe(true);
    }
  };

  // The install commands first, as dry runs on a cluster the product is not on yet (a dry run
  // over the harness's installation would merge with its two patches). Its namespace exists,
  // as it would once a namespaced object's dry run mattered.
  it('the install commands, as dry runs before anything is installed', { timeout: 300_000 }, async () => {
    await e.core.readNamespace({ name: 'ownerrefs-system' }).catch(() => e.core.createNamespace({ body: { metadata: { name: 'ownerrefs-system' } } }));
    expect((await e.apps.listNamespacedDaemonSet({ namespace: 'ownerrefs-system' })).items).toEqual([]); // nothing of the product yet
    await namespace('docs-install-dry-run');
    const dry = userDocs().flatMap((f) => shellBlocks(f)).filter((b) => b.how === 'dry-run');
    expect(dry.length).toBeGreaterThan(0);
    for (const b of dry) await runBlock(b, 'docs-install-dry-run');
  });

  it('installs the product as the harness does (the chart\'s rendering with its two patches, the webhook by URL)', { timeout: 300_000 }, async () => {
    await apply(e.kc, rendering(e, { helm: helmBin(), chart: CHART, image: { repository: 'localhost/ownerrefs/ownerrefs-agent', tag: 'dev' }, port: await freePort() },
      ['--set', 'followOwners.rbac=true']) as KubernetesObject[]);
    await readyAgent(e);
    webhook = await startWebhook(e.kc, e.node.workDir);
  });

  const pages = userDocs().filter((f) => shellBlocks(f).some((b) => b.how === 'run'));
  it.each(pages)('%s: every command runs as written and prints what the page shows', { timeout: 900_000 }, async (file) => {
    const ns = `docs-${path.basename(file, '.md').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${pages.indexOf(file)}`;
    await namespace(ns);
    for (const b of shellBlocks(file)) if (b.how === 'run') await runBlock(b, ns);
  });

  it.each(examples())('%s applies as written, the commands of its comment run, its pods become Ready', { timeout: 600_000 }, async (file) => {
    const ns = `ex-${path.basename(file, '.yaml')}`;
    await namespace(ns);
    const commands = exampleCommands(readFileSync(path.join(ROOT, file), 'utf8'));
    if (!commands.some((c) => c.startsWith(`kubectl apply -f ${file}`))) commands.unshift(`kubectl apply -f ${file}`);
    for (const c of commands) {
      // A comment's commands follow each other as a reader types them: retried until the pod they need is there.
      const r = await e.waitFor(async () => { const x = await sh(c, ns, 30_000); return x.code === 0 ? x : undefined; }, `${file}: ${c}`, 150_000);
      expect(r.code).toBe(0);
    }
    await e.waitFor(async () => {
      const pods = (await e.core.listNamespacedPod({ namespace: ns })).items;
      return pods.length > 0 && pods.every((p) => p.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True')) || undefined;
    }, `${file}: every pod Ready`, 150_000);
    expect((await sh(`kubectl delete -f ${file} --wait=false`, ns)).code).toBe(0);
  });
});
