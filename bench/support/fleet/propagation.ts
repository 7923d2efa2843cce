// Propagation on several nodes at once, against the floor, for bench:fleet: every pod on
// the probe nodes gets a second (non-controller) owner, then loses it, round after round.
// Per pod and round: the write's return -> the agent's file holding the new bytes (the
// file probe) and -> a bare watch of that node's pods seeing the event (the floor probe).
// Both probes are processes of their own, as in the main benchmark; their clocks are
// CLOCK_MONOTONIC. The controllers ignore non-controller owners, so the rounds do not
// fight them.
//
// The file probe is quiet by default, as in the main benchmark (bench/probes/files.ts): no
// watch while the agents work, each file timed by its ctime from a scan once the floor has
// every event. `quiet: false` gives the inotify probe, woken by each of the agents' writes.

import { existsSync } from 'node:fs';
import path from 'node:path';
import type { KubeApiClient } from '../../../agent/kube/client.ts';
import { project, type OwnerReference } from '../../../projections/index.ts';
import { ProbeProcess } from '../ipc.ts';
import { MERGE } from '../cluster.ts';
import { awaitProbes } from '../measure.ts';
import { dist, nowMs, pool, round, type Dist } from '../stats.ts';

interface Pod { name: string; uid: string; node: string; dir: string; owners: OwnerReference[] }

export interface NodePropagation { node: string; events: number; agentMs: Dist; floorMs: Dist; ratioP99: number }
export interface FleetPropagation {
  nodes: number; podsPerNode: number; rounds: number; events: number;
  /** How the agents' files were timed (the quiet probe by their ctime, or inotify). */
  probe: string;
  agentMs: Dist; floorMs: Dist; ratioP99: number;
  /** Per node: its own p99 against its own floor. */
  perNode: NodePropagation[];
  /** Of the per-node p99 ratios: the best, the median, the worst. */
  perNodeRatioP99: { min: number; median: number; max: number };
}

const PROBES = path.join(import.meta.dirname, '..', '..', 'probes');
const WAIT_MS = 60_000;
const IN_FLIGHT = 8;

export async function propagationOnNodes(o: {
  api: KubeApiClient; kubeconfig: string; namespace: string; rounds: number;
  nodes: { name: string; kubeletRoot: string }[];
  /** Time the files by their ctime, with no watch during the rounds (default true). */
  quiet?: boolean;
}): Promise<FleetPropagation> {
  const quiet = o.quiet ?? true;
  const ns = o.namespace;
  const extra = await o.api.json<{ metadata: { uid: string; name: string } }>('POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'fleet-extra-owner' } });
  const extraRef: OwnerReference = { apiVersion: 'v1', kind: 'ConfigMap', name: extra.metadata.name, uid: extra.metadata.uid };
  const roots = new Map(o.nodes.map((n) => [n.name, n.kubeletRoot]));
  const list = await o.api.json<{ items: { metadata: { name: string; uid: string; ownerReferences?: OwnerReference[]; deletionTimestamp?: string }; spec: { nodeName?: string }; status?: { phase?: string } }[] }>(
    'GET', `/api/v1/namespaces/${ns}/pods`);
  const pods: Pod[] = list.items
    .filter((p) => roots.has(p.spec.nodeName ?? '') && p.status?.phase === 'Running' && !p.metadata.deletionTimestamp)
    .map((p) => ({
      name: p.metadata.name, uid: p.metadata.uid, node: p.spec.nodeName!, owners: p.metadata.ownerReferences ?? [],
      dir: path.join(roots.get(p.spec.nodeName!)!, 'pods', p.metadata.uid, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'),
    }));
  if (pods.length === 0) throw new Error('propagation: no running pod on the probe nodes');
  const gone = pods.filter((p) => !existsSync(p.dir));
  if (gone.length) throw new Error(`propagation: ${gone.length} running pods have no volume directory (${gone[0]!.dir})`);

  const floor = new ProbeProcess(path.join(PROBES, 'floor.ts'), [o.kubeconfig, o.nodes.map((n) => n.name).join(',')]);
  const files = new ProbeProcess(path.join(PROBES, 'files.ts'));
  try {
    await floor.call('start');
    const agentMs = new Map<string, number[]>(o.nodes.map((n) => [n.name, []]));
    const floorMs = new Map<string, number[]>(o.nodes.map((n) => [n.name, []]));
    for (let r = 0; r < o.rounds; r++) {
      const add = r % 2 === 0;
      const ownersOf = (p: Pod) => (add ? [...p.owners, extraRef] : p.owners);
      const bytes = (p: Pod) => project({ metadata: { ownerReferences: ownersOf(p) } }).find((f) => f.path === 'ownerReferences')!.bytes.toString('utf8');
      await floor.call('arm', { expect: Object.fromEntries(pods.map((p) => [p.uid, extraRef.uid])), match: add ? 'has' : 'lacks' });
      await files.call('arm', { items: pods.map((p) => ({ key: p.uid, dir: p.dir, expected: bytes(p) })), quiet });
      const returned = new Map<string, number>();
      await pool(pods, IN_FLIGHT, async (p) => {
        await o.api.json('PATCH', `/api/v1/namespaces/${ns}/pods/${p.name}`, { metadata: { ownerReferences: ownersOf(p) } }, MERGE);
        returned.set(p.uid, nowMs());
      });
      const [fl, fi] = await awaitProbes(floor, files, quiet, WAIT_MS);
      if (fl.missing.length || fi.missing.length) {
        throw new Error(`propagation round ${r}: the floor missed ${fl.missing.length} events, ${fi.missing.length} files did not converge within ${WAIT_MS / 1000} s`);
      }
      for (const p of pods) {
        // Quiet: the scan's moment means nothing; the file landed at its ctime.
        const got = quiet ? fi.landed?.[p.uid] : fi.times[p.uid];
        if (got === undefined) throw new Error(`propagation round ${r}: no ${quiet ? 'ctime' : 'time'} for pod ${p.name}'s file`);
        agentMs.get(p.node)!.push(got - returned.get(p.uid)!);
        floorMs.get(p.node)!.push(fl.times[p.uid]! - returned.get(p.uid)!);
      }
    }
    const perNode = o.nodes.map((n) => {
      const a = dist(agentMs.get(n.name)!);
      const f = dist(floorMs.get(n.name)!);
      return { node: n.name, events: agentMs.get(n.name)!.length, agentMs: a, floorMs: f, ratioP99: round(a.p99 / f.p99, 2) };
    }).filter((n) => n.events > 0);
    const a = dist([...agentMs.values()].flat());
    const f = dist([...floorMs.values()].flat());
    const ratios = perNode.map((n) => n.ratioP99).sort((x, y) => x - y);
    return {
      nodes: perNode.length, podsPerNode: round(pods.length / perNode.length, 1), rounds: o.rounds, events: pods.length * o.rounds,
      probe: quiet ? 'quiet: no watch during the rounds; each file by its ctime' : 'inotify: woken by each event, then the bytes confirmed',
      agentMs: a, floorMs: f, ratioP99: round(a.p99 / f.p99, 2), perNode,
      perNodeRatioP99: { min: ratios[0]!, median: ratios[Math.floor(ratios.length / 2)]!, max: ratios.at(-1)! },
    };
  } finally {
    await floor.stop();
    await files.stop();
  }
}
