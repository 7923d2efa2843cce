// CSI volumes that carry downwardAPI items (by hand, or stored by an earlier webhook's rewrite):
// each gets exactly its items, rendered as the kubelet would, kept live from pod events
// and the node's allocatable; items that cannot be served fail the publish and are
// reported, without touching the pod's other volumes.

import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { targetFor } from '../../../agent/files/csi/paths.ts';

import { renderDownwardAPI, type DownwardAPISource } from '../../../projections/downwardapi.ts';
import { FILES } from '../../../projections/index.ts';
import { waitFor } from '../../../localcluster/wait.ts';
import { agentKit } from '../../support/agentkit.ts';
import { owner, pod } from '../../support/fixtures.ts';
import { type PodView } from '../../../agent/node/podview.ts';

const DRIVER = 'ownerrefs.dev';
const SOURCE: DownwardAPISource = {
  defaultMode: 0o640,
  items: [
    { path: 'ownerReferences', fieldRef: { fieldPath: 'metadata.ownerReferences' } },
    { path: 'meta/labels', fieldRef: { fieldPath: 'metadata.labels' } },
    { path: 'meta/deep/name', fieldRef: { fieldPath: 'metadata.name' }, mode: 0o600 },
    { path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } },
  ],
};

function itemPod(source: unknown = SOURCE, extra: Record<string, unknown> = {}): PodView {
  const p = pod({ annotation: undefined, owners: [owner({ name: 'one' })] });
  return {
    ...p,
    metadata: { ...p.metadata, labels: { app: 'web' }, ...extra },
    spec: {
      containers: [{ name: 'app', resources: { requests: { cpu: '100m' } } }],
      volumes: [
        { name: 'podinfo', csi: { driver: DRIVER, volumeAttributes: { downwardAPI: typeof source === 'string' ? source : JSON.stringify(source) } } },
        { name: 'plain', csi: { driver: DRIVER } },
      ],
    },
  } as PodView;
}

function parent(root: string, uid: string, volume: string) {
  const t = targetFor(root, uid, volume);
  mkdirSync(path.join(root, ...t.target.components.slice(0, -1)), { recursive: true, mode: 0o750 });
  return { ...t, dir: path.join(root, ...t.target.components) };
}

/** Every file below dir: relative path -> [mode, text]. */
function tree(dir: string, prefix = ''): Record<string, [number, string]> {
  const out: Record<string, [number, string]> = {};
  for (const name of readdirSync(path.join(dir, prefix))) {
    const rel = prefix ? `${prefix}/${name}` : name;
    const st = statSync(path.join(dir, rel));
    if (st.isDirectory()) Object.assign(out, tree(dir, rel));
    else out[rel] = [st.mode & 0o777, readFileSync(path.join(dir, rel), 'utf8')];
  }
  return out;
}

/** An agent in CSI mode with the item pod tracked and its `podinfo` volume published. */
async function publishedItems(source: unknown = SOURCE) {
  const k = agentKit({ csiDriver: DRIVER });
  const p = itemPod(source);
  const uid = p.metadata!.uid!;
  k.reconciler.upsert(p);
  const items = parent(k.root, uid, 'podinfo');
  await k.reconciler.publish(uid, 'podinfo', items.target);
  return { k, p, uid, items };
}

const expected = (p: PodView, alloc = {}) =>
  Object.fromEntries(renderDownwardAPI(p, SOURCE, alloc).map((f) => [f.path, [f.mode, f.bytes.toString('utf8')]]));

describe('a CSI volume of downwardAPI items', () => {
  it('holds exactly its items, rendered as the kubelet would, the next volume of the pod the agent\'s own files', async () => {
    const k = agentKit({ csiDriver: DRIVER });
    k.reconciler.setAllocatable({ cpu: '3500m' });
    const p = itemPod();
    const uid = p.metadata!.uid!;
    k.reconciler.upsert(p);
    const items = parent(k.root, uid, 'podinfo');
    const plain = parent(k.root, uid, 'plain');
    expect(await k.reconciler.publish(uid, 'podinfo', items.target)).toBe(true);
    expect(await k.reconciler.publish(uid, 'plain', plain.target)).toBe(true);
    expect(tree(items.dir)).toEqual(expected(p, { cpu: '3500m' }));
    expect(tree(items.dir).cpu).toEqual([0o640, '3500']); // no limit: the node's allocatable
    expect(readdirSync(plain.dir).sort()).toEqual([FILES.dependents, FILES.ownerReferences, FILES.env].sort());
  });

  it('follows labels, owners and the node\'s allocatable live', async () => {
    const { k, p, items } = await publishedItems();
    const next = { ...p, metadata: { ...p.metadata, labels: { app: 'web', tier: 'gold' }, ownerReferences: [owner({ name: 'two' })] } } as PodView;
    k.reconciler.upsert(next);
    k.reconciler.setAllocatable({ cpu: '2' });
    const sorted = (o: object) => JSON.stringify(Object.entries(o).sort());
    await waitFor(() => sorted(tree(items.dir)) === sorted(expected(next, { cpu: '2' })) || undefined, { describe: 'items re-rendered', timeoutMs: 10_000 });
    expect(tree(items.dir).cpu).toEqual([0o640, '2000']);
  });

  it('is left alone by node labels that turn the agent\'s own files off', async () => {
    const { k, p, items } = await publishedItems();
    k.reconciler.setSettings({ paused: false, envFile: false, dependentsFile: false, nodeFile: false, followOwners: false });
    await k.reconciler.idle();
    expect(tree(items.dir)).toEqual(expected(p));
  });

  it.each([
    { what: 'not JSON', source: '{"items":', error: /not JSON/ },
    { what: 'a path that climbs out', source: { items: [{ path: '../../etc/x', fieldRef: { fieldPath: 'metadata.name' } }] }, error: /must not contain '\.\.'/ },
    { what: 'a container the pod lacks', source: { items: [{ path: 'c', resourceFieldRef: { containerName: 'ghost', resource: 'limits.cpu' } }] }, error: /no container "ghost"/ },
    { what: 'a reserved name', source: { items: [{ path: '.ownerrefs-tmp.x', fieldRef: { fieldPath: 'metadata.name' } }] }, error: /reserved/ },
  ])('refuses $what: the publish fails, an Event says why, the pod\'s other volume is served', async ({ source, error }) => {
    const k = agentKit({ csiDriver: DRIVER });
    const p = itemPod(source);
    const uid = p.metadata!.uid!;
    k.reconciler.upsert(p);
    const items = parent(k.root, uid, 'podinfo');
    const plain = parent(k.root, uid, 'plain');
    await expect(k.reconciler.publish(uid, 'podinfo', items.target)).rejects.toMatchObject({ reason: 'InvalidDownwardAPI', message: expect.stringMatching(error) });
    expect(existsSync(items.dir)).toBe(false);
    expect(k.events.sent).toEqual([expect.objectContaining({ reason: 'OwnerRefsProjectionFailed', message: expect.stringMatching(new RegExp(`^InvalidDownwardAPI: volume "podinfo": .*${error.source}`)) })]);
    expect(await k.reconciler.publish(uid, 'plain', plain.target)).toBe(true);
    expect(existsSync(path.join(plain.dir, FILES.ownerReferences))).toBe(true);
  });

  it('unpublish removes the items, the directories the agent made for them, and the target', async () => {
    const { k, uid, items } = await publishedItems();
    const removed = await k.reconciler.unpublish(uid, 'podinfo', items.target);
    expect(removed.sort()).toEqual(['cpu', 'meta/deep/name', 'meta/labels', 'ownerReferences']);
    expect(existsSync(items.dir)).toBe(false);
  });

  it('unpublish removes them all too when the pod is already gone (deleted first, or not listed since a restart): the kubelet would retry it forever', async () => {
    const { k, uid, items, p } = await publishedItems();
    k.reconciler.remove(p);
    const removed = await k.reconciler.unpublish(uid, 'podinfo', items.target);
    expect(removed.sort()).toEqual(['cpu', 'meta/deep/name', 'meta/labels', 'ownerReferences']);
    expect(existsSync(items.dir)).toBe(false);
  });

  it('unpublish removes them all too when its author made the items refused since the publish (the pod would stay Terminating)', async () => {
    const { k, uid, items, p } = await publishedItems();
    // metadata.labels quoted past --max-bytes: the volume is TooLarge from now on
    k.reconciler.upsert({ ...p, metadata: { ...p.metadata, labels: { big: '"'.repeat(600_000) } } } as PodView);
    await k.reconciler.idle();
    expect(k.events.sent.map((e) => e.message)).toEqual([expect.stringMatching(/^TooLarge: /)]);
    const removed = await k.reconciler.unpublish(uid, 'podinfo', items.target);
    expect(removed.sort()).toEqual(['cpu', 'meta/deep/name', 'meta/labels', 'ownerReferences']);
    expect(existsSync(items.dir)).toBe(false);
  });
});
