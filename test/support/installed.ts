// The product installed as users install it, on the real node of realnode-e2e.ts: a chart's
// rendering applied with server-side apply, or a release of the chart made by `helm` itself;
// the agent running as the DaemonSet's pod from an image imported into the node's containerd.
//
// Two things of this harness differ from a cluster, and each rendering is patched for them
// (nothing else; postrender.ts): there is no `kubernetes` Service routing (no kube-proxy),
// so the agent's pod uses the host network and is told the API server's address, and the
// webhook's pods are pointed at the node's relay for pods (localcluster/node/apiforpods.ts);
// and the node's kubelet root is a temporary directory, passed as kubeletRootDir. The host's
// root mount is made shared, as systemd makes it on every node, so that HostToContainer
// propagation is allowed.

import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { V1Pod } from '@kubernetes/client-node';
import { parseManifests, patchForHarness, type Harness } from './postrender.ts';
import type { RealNodeE2E } from './realnode-e2e.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const run = promisify(execFile);

export interface Rendering {
  helm: string;
  /** The chart's directory (this version's, or an older one's from a worktree). */
  chart: string;
  image: { repository: string; tag: string };
  /** The agent's health port on the host network. */
  port: number;
}

const harness = (e: RealNodeE2E, r: Rendering): Harness => ({ server: e.cp.server, agentPort: r.port, pods: e.node.apiForPods?.podPatch() });
/** The values every install here sets: the node's kubelet root, and the image imported into it. */
const harnessValues = (e: RealNodeE2E, r: Rendering) => ['--set', `kubeletRootDir=${e.node.kubeletRoot}`,
  '--set', `image.repository=${r.image.repository}`, '--set', `image.tag=${r.image.tag}`, '--set', 'image.pullPolicy=Never'];

/** The chart's objects for the harness's node, with its two differences (see the top of the file). */
export function rendering(e: RealNodeE2E, r: Rendering, values: string[] = []): Obj[] {
  const rendered = execFileSync(r.helm, ['template', 'ownerrefs-agent', r.chart, ...harnessValues(e, r), ...values]).toString();
  return patchForHarness(parseManifests(rendered), harness(e, r));
}

/** A helm home whose plugin directory holds the harness's post-renderer (postrender.ts). */
function harnessHome(): string {
  const home = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-helm-'));
  const plugin = path.join(home, 'plugins', 'ownerrefs-harness');
  mkdirSync(plugin, { recursive: true });
  writeFileSync(path.join(plugin, 'render.sh'), `#!/bin/sh\nexec '${process.execPath}' '${path.join(import.meta.dirname, 'postrender.ts')}'\n`, { mode: 0o755 });
  writeFileSync(path.join(plugin, 'plugin.yaml'), 'apiVersion: v1\nname: ownerrefs-harness\nversion: 0.1.0\ntype: postrenderer/v1\nruntime: subprocess\n' +
    'runtimeConfig:\n  platformCommand:\n  - command: "${HELM_PLUGIN_DIR}/render.sh"\n');
  return home;
}
const helmEnv = (e: RealNodeE2E, r: Rendering, home: string) => ({ HELM_PLUGINS: path.join(home, 'plugins'), HELM_CONFIG_HOME: home, HELM_CACHE_HOME: home, HELM_DATA_HOME: home,
  OWNERREFS_HARNESS: JSON.stringify(harness(e, r)) });

/**
 * Runs `helm` against the harness's cluster, as users run it, with the harness's differences
 * applied by a post-renderer plugin (postrender.ts) in a plugin directory of its own.
 * `install` and `upgrade` get the harness's values too.
 */
export async function helm(e: RealNodeE2E, r: Rendering, args: string[]): Promise<string> {
  const home = harnessHome();
  // Only these render; a rollback applies what an earlier revision stored, as rendered then.
  const renders = args[0] === 'install' || args[0] === 'upgrade';
  const full = [...args, ...(renders ? [...harnessValues(e, r), '--post-renderer', 'ownerrefs-harness'] : []), `--kubeconfig=${e.cp.kubeconfigPath}`];
  try {
    return (await run(r.helm, full, { env: { ...process.env, ...helmEnv(e, r, home) } })).stdout;
  } catch (err) {
    throw new Error(`helm ${args.join(' ')}: ${(err as { stderr?: string }).stderr?.trim() || String(err)}`, { cause: err });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * A `helm` command in `bin`, for a doc's commands run as written: it runs the real helm with
 * the harness's differences as helm() adds them, but names no image: the node pulls the one
 * the command names. Returns its cleanup.
 */
export function helmOnPath(e: RealNodeE2E, r: Rendering, bin: string): () => void {
  const home = harnessHome();
  const env = Object.entries({ ...helmEnv(e, r, home), KUBECONFIG: e.cp.kubeconfigPath }).map(([k, v]) => `export ${k}='${v.replaceAll("'", "'\\''")}'`).join('\n');
  writeFileSync(path.join(bin, 'helm'), `#!/bin/sh\n${env}\ncase "$1" in install|upgrade) exec '${r.helm}' "$@" --set 'kubeletRootDir=${e.node.kubeletRoot}' --post-renderer ownerrefs-harness ;; esac\nexec '${r.helm}' "$@"\n`, { mode: 0o755 });
  return () => rmSync(home, { recursive: true, force: true });
}

/** The agent's pod once it is Ready (and, with `not`, not that pod: a rolled one). */
export async function readyAgent(e: RealNodeE2E, not?: string): Promise<V1Pod> {
  let last = '';
  return e.waitFor(async () => {
    const pods = (await e.core.listNamespacedPod({ namespace: 'ownerrefs-system', labelSelector: 'app.kubernetes.io/name=ownerrefs-agent' })).items;
    last = JSON.stringify(pods.map((p) => ({ phase: p.status?.phase, conditions: p.status?.conditions?.map((c) => `${c.type}=${c.status}`), containers: p.status?.containerStatuses?.map((c) => c.state) })));
    const ev = (await e.core.listNamespacedEvent({ namespace: 'ownerrefs-system' })).items.map((x) => `${x.reason}: ${x.message}`).slice(-5);
    last += `\n${ev.join('\n')}`;
    return pods.find((p) => p.metadata!.name !== not && !p.metadata!.deletionTimestamp && p.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True'));
  }, 'the agent pod Ready', 150_000).catch((err: unknown) => { throw new Error(`${String(err)}\nlast seen: ${last}`); });
}
