// The product installed as users install it, on the real node of realnode-e2e.ts: a chart's
// rendering applied with server-side apply, the agent running as the DaemonSet's pod from
// an image imported into the node's containerd.
//
// Two things of this harness differ from a cluster, and each rendering is patched for them
// (nothing else): there is no Service routing (no kube-proxy), so the agent's pod uses the
// host network and is told the API server's address; and the node's kubelet root is a
// temporary directory, passed as kubeletRootDir. The host's root mount is made shared, as
// systemd makes it on every node, so that HostToContainer propagation is allowed.

import { execFileSync } from 'node:child_process';
import type { V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import type { RealNodeE2E } from './realnode-e2e.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Rendering {
  helm: string;
  /** The chart's directory (this version's, or an older one's from a worktree). */
  chart: string;
  image: { repository: string; tag: string };
  /** The agent's health port on the host network. */
  port: number;
}

/** The chart's objects for the harness's node, with its two differences (see the top of the file). */
export function rendering(e: RealNodeE2E, r: Rendering, values: string[] = []): Obj[] {
  const api = new URL(e.cp.server);
  const rendered = execFileSync(r.helm, ['template', 'ownerrefs-agent', r.chart, '--set', `kubeletRootDir=${e.node.kubeletRoot}`,
    '--set', `image.repository=${r.image.repository}`, '--set', `image.tag=${r.image.tag}`, '--set', 'image.pullPolicy=Never', ...values]).toString();
  const objs = parseAllDocuments(rendered).map((d) => d.toJS() as Obj).filter(Boolean);
  const spec = objs.find((o) => o.kind === 'DaemonSet')!.spec.template.spec;
  spec.hostNetwork = true;
  spec.dnsPolicy = 'ClusterFirstWithHostNet';
  const c = spec.containers[0];
  c.env.push({ name: 'KUBERNETES_SERVICE_HOST', value: api.hostname }, { name: 'KUBERNETES_SERVICE_PORT', value: api.port });
  c.args = c.args.map((a: string) => (a.startsWith('--health-addr=') ? `--health-addr=0.0.0.0:${r.port}` : a));
  c.ports = [{ name: 'http-health', containerPort: r.port, protocol: 'TCP' }];
  return objs;
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
