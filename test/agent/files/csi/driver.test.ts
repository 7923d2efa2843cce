// The CSI Node and Identity services over their unix socket, with the real reconciler
// and writer on a temporary kubelet root. Calls are made the way the kubelet makes
// them (support/csi.ts); pod watch events are fed to the reconciler by hand.

import { chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCsi, type RunningCsi } from '../../../../agent/files/csi/start.ts';
import { ApiError } from '../../../../agent/kube/client.ts';
import { DEFAULT_SETTINGS } from '../../../../agent/node/nodeconfig.ts';

import { FILES, project } from '../../../../projections/index.ts';
import { agentKit } from '../../../support/agentkit.ts';
import { csiClient, DRIVER, kubeletPrepare } from '../../../support/csi.ts';
import { owner, pod } from '../../../support/fixtures.ts';
import { snapshot, tmpDir } from '../../../support/tmpdir.ts';
import { waitFor } from '../../../../localcluster/wait.ts';
import { type PodView } from '../../../../agent/node/podview.ts';

const NODE = 'node-a';
const running: RunningCsi[] = [];
afterEach(async () => {
  for (const c of running.splice(0)) await c.stop();
});

/** A pod that opts in the CSI way: no annotation, an inline volume of the driver. */
function csiPod(over: Parameters<typeof pod>[0] = {}): PodView & { spec: { nodeName: string } } {
  const p = pod({ annotation: undefined, volumes: [{ name: 'podinfo', csi: { driver: DRIVER, readOnly: true } }], ...over });
  return { ...p, spec: { ...p.spec, nodeName: NODE } };
}

function ref(p: PodView) {
  return { name: p.metadata!.name!, namespace: p.metadata!.namespace!, uid: p.metadata!.uid! };
}

async function setup(opts: { podWaitMs?: number; apiPods?: PodView[]; root?: string; maxBytes?: number } = {}) {
  const k = agentKit({ csiDriver: DRIVER, ...(opts.root ? { root: opts.root } : {}), ...(opts.maxBytes ? { maxBytes: opts.maxBytes } : {}) });
  const dir = tmpDir('csi-');
  const socket = path.join(dir, 'plugins', DRIVER, 'csi.sock');
  const gets: string[] = [];
  const client = {
    json: async <T>(_method: string, p: string): Promise<T> => {
      gets.push(p);
      const found = (opts.apiPods ?? []).find((x) => p === `/api/v1/namespaces/${x.metadata!.namespace}/pods/${x.metadata!.name}`);
      if (!found) throw new ApiError(404, 'NotFound', 'pods not found');
      return found as T;
    },
  };
  const csi = await startCsi({
    socket, registrationDir: path.join(dir, 'plugins_registry'), kubeletRoot: k.root, nodeName: NODE,
    pods: k.reconciler, client, ready: () => true, log: k.log, registry: k.metrics.registry, podWaitMs: opts.podWaitMs ?? 30_000,
  });
  running.push(csi);
  return { ...k, socket, dir, gets, csi, c: csiClient(socket) };
}

const read = (dir: string, f: string = FILES.ownerReferences) => readFileSync(path.join(dir, f), 'utf8');

describe('CSI Identity and Node services', () => {
  it('name the driver, offer no controller, stage or stats, and report this node', async () => {
    const { c } = await setup();
    expect((await c.call('identity', 'GetPluginInfo')).res).toMatchObject({ name: 'ownerrefs.dev', vendorVersion: '0.1.0' });
    expect((await c.call('identity', 'GetPluginCapabilities')).res).toEqual({ capabilities: [] });
    expect((await c.call('identity', 'Probe')).res).toMatchObject({ ready: { value: true } });
    expect((await c.call('node', 'NodeGetCapabilities')).res).toEqual({ capabilities: [] });
    expect((await c.call('node', 'NodeGetInfo')).res).toMatchObject({ nodeId: NODE, maxVolumesPerNode: '0' });
  });

  it('answer the kubelet registration: a CSI plugin, its socket, CSI 1.0.0', async () => {
    const { dir, socket } = await setup();
    const reg = csiClient(path.join(dir, 'plugins_registry', `${DRIVER}-reg.sock`));
    expect((await reg.call('registration', 'GetInfo')).res).toEqual({
      type: 'CSIPlugin', name: DRIVER, endpoint: socket, supportedVersions: ['1.0.0'],
    });
    expect((await reg.call('registration', 'NotifyRegistrationStatus', { pluginRegistered: true })).code).toBe(0);
  });

  it('publish writes the files before it returns, with no API request for a pod the watch delivered', async () => {
    const { root, reconciler, c, gets } = await setup();
    const p = csiPod({ owners: [owner({ name: 'ds-a' })] });
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    const r = await c.call('node', 'NodePublishVolume', req);
    expect(r).toMatchObject({ code: 0 });
    // No waiting: the call's return is the guarantee the kubelet relies on.
    expect(readdirSync(req.targetPath).sort()).toEqual(project(p, DEFAULT_SETTINGS).map((f) => f.path).sort());
    for (const f of project(p, DEFAULT_SETTINGS)) {
      expect(readFileSync(path.join(req.targetPath, f.path))).toEqual(f.bytes);
      expect(statSync(path.join(req.targetPath, f.path)).mode & 0o7777).toBe(0o644);
    }
    expect(statSync(req.targetPath).mode & 0o7777).toBe(0o755);
    expect(readdirSync(path.dirname(req.targetPath)).sort()).toEqual(['mount', 'vol_data.json']);
    expect(gets).toEqual([]);
  });

  it('keeps a published volume current as owners change, like an emptyDir volume', async () => {
    const { root, reconciler, c } = await setup();
    const p = csiPod({ owners: [owner({ name: 'ds-a' })] });
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [] } });
    await waitFor(() => read(req.targetPath) === '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}');
    reconciler.upsert(p);
    await waitFor(() => read(req.targetPath).includes('"name":"ds-a"'));
  });

  it('refuses a volume that is not read-only with InvalidArgument saying what to change', async () => {
    const { root, reconciler, c } = await setup();
    const p = csiPod();
    reconciler.upsert(p);
    const req = { ...kubeletPrepare(root, ref(p)), readonly: false };
    const r = await c.call('node', 'NodePublishVolume', req);
    expect(r.code).toBe(3);
    expect(r.details).toMatch(/readOnly: true.*spec\.volumes\[\]\.csi\.readOnly/);
    expect(existsSync(req.targetPath)).toBe(false);
  });

  const UID = '00000000-0000-4000-8000-0000000000aa';
  const good = (root: string) => kubeletPrepare(root, { name: 'p', namespace: 'default', uid: UID });
  it.each([
    { what: 'no volume id', edit: (r: Req) => ({ ...r, volumeId: '' }), says: /volume_id is required/ },
    { what: 'no target path', edit: (r: Req) => ({ ...r, targetPath: '' }), says: /target_path is required/ },
    { what: 'no volume capability', edit: (r: Req) => ({ ...r, volumeCapability: undefined }), says: /volume_capability is required/ },
    { what: 'a block volume', edit: (r: Req) => ({ ...r, volumeCapability: { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } } }), says: /not a block device/ },
    { what: 'a persistent volume', edit: (r: Req) => ({ ...r, volumeContext: { ...r.volumeContext, 'csi.storage.k8s.io/ephemeral': 'false' } }), says: /only ephemeral inline/ },
    { what: 'no pod info', edit: (r: Req) => ({ ...r, volumeContext: { 'csi.storage.k8s.io/ephemeral': 'true' } }), says: /podInfoOnMount: true/ },
    { what: 'volumeAttributes', edit: (r: Req) => ({ ...r, volumeContext: { ...r.volumeContext, color: 'blue' } }), says: /takes one volumeAttribute, downwardAPI \(a downwardAPI volume source as JSON\); remove "color"/ },
    { what: 'another pod\'s directory', edit: (r: Req) => ({ ...r, targetPath: r.targetPath.replace(UID, '00000000-0000-4000-8000-0000000000bb') }), says: /names pod UID/ },
    { what: 'a target outside the kubelet root', edit: (r: Req) => ({ ...r, targetPath: `/tmp/pods/${UID}/volumes/kubernetes.io~csi/podinfo/mount` }), says: /not below the kubelet root/ },
    { what: 'a dot-dot component', edit: (r: Req) => ({ ...r, targetPath: r.targetPath.replace('/mount', '/../../../../etc/mount') }), says: /not a clean absolute path/ },
    { what: 'a relative target', edit: (r: Req) => ({ ...r, targetPath: 'pods/x/mount' }), says: /not a clean absolute path/ },
    { what: 'another plugin\'s directory', edit: (r: Req) => ({ ...r, targetPath: r.targetPath.replace('kubernetes.io~csi', 'kubernetes.io~empty-dir') }), says: /layout/ },
    { what: 'a target not named mount', edit: (r: Req) => ({ ...r, targetPath: r.targetPath.replace(/mount$/, 'target') }), says: /layout/ },
    { what: 'an upper-case volume directory', edit: (r: Req) => ({ ...r, targetPath: r.targetPath.replace('/podinfo/', '/PodInfo/') }), says: /not a valid volume name/ },
  ])('refuses $what with InvalidArgument and touches nothing', async ({ edit, says }) => {
    const { root, c } = await setup();
    const req = good(root);
    const before = snapshot(root);
    const r = await c.call('node', 'NodePublishVolume', edit(req));
    expect(r.code).toBe(3);
    expect(r.details).toMatch(says);
    expect(snapshot(root)).toEqual(before);
  });

  it('is idempotent: a repeated publish succeeds and rewrites nothing; another volume at the same target is AlreadyExists', async () => {
    const { root, reconciler, c } = await setup();
    const p = csiPod();
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    const inode = statSync(path.join(req.targetPath, FILES.ownerReferences)).ino;
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    expect(statSync(path.join(req.targetPath, FILES.ownerReferences)).ino).toBe(inode);
    expect((await c.call('node', 'NodePublishVolume', { ...req, volumeId: 'csi-other' })).code).toBe(6);
  });

  it('waits for a pod the watch has not delivered yet, without asking the API server', async () => {
    const { root, reconciler, c, gets } = await setup({ podWaitMs: 60_000 });
    const p = csiPod({ owners: [owner({ name: 'late' })] });
    const req = kubeletPrepare(root, ref(p));
    const call = c.call('node', 'NodePublishVolume', req);
    setTimeout(() => reconciler.upsert(p), 100);
    expect((await call).code).toBe(0);
    expect(read(req.targetPath)).toContain('"name":"late"');
    expect(gets).toEqual([]);
  });

  it('refuses a volume context naming no valid namespace/name at once, not after the wait for the pod', async () => {
    const { root, c, gets } = await setup({ podWaitMs: 600_000 });
    const p = csiPod();
    const req = kubeletPrepare(root, { ...ref(p), namespace: 'a\nb', name: '../../x' });
    const r = await c.call('node', 'NodePublishVolume', req);
    expect(r.code).toBe(3);
    expect(r.details).toMatch(/names pod "a\\nb\/..\/..\/x", which is not a valid namespace\/name/);
    expect(gets).toEqual([]);
  });

  it('reads the pod once from the API server when the watch does not deliver it in time', async () => {
    const p = csiPod({ owners: [owner({ name: 'fetched' })] });
    const { root, c, gets } = await setup({ podWaitMs: 10, apiPods: [p] });
    const req = kubeletPrepare(root, ref(p));
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    expect(read(req.targetPath)).toContain('"name":"fetched"');
    expect(gets).toEqual([`/api/v1/namespaces/default/pods/${p.metadata!.name}`]);
  });

  it.each([
    { what: 'does not exist', api: () => [], code: 5, says: /does not exist/ },
    { what: 'was replaced (another UID)', api: (p: Pod) => [{ ...p, metadata: { ...p.metadata, uid: 'ffffffff-0000-4000-8000-000000000000' } }], code: 5, says: /was replaced/ },
    { what: 'is bound to another node', api: (p: Pod) => [{ ...p, spec: { ...p.spec, nodeName: 'node-b' } }], code: 9, says: /bound to node "node-b"/ },
    { what: 'has no volume of the driver', api: (p: Pod) => [{ ...p, spec: { ...p.spec, volumes: [{ name: 'podinfo', csi: { driver: 'other.dev' } }] } }], code: 9, says: /declares no csi volume/ },
  ])('refuses a pod the API server says $what', async ({ api, code, says }) => {
    const p = csiPod();
    const { root, c } = await setup({ podWaitMs: 10, apiPods: api(p) });
    const req = kubeletPrepare(root, ref(p));
    const r = await c.call('node', 'NodePublishVolume', req);
    expect(r.code).toBe(code);
    expect(r.details).toMatch(says);
    expect(existsSync(req.targetPath)).toBe(false);
  });

  it('publishes even while the node is paused: a new volume gets its files', async () => {
    const { root, reconciler, c } = await setup();
    reconciler.setSettings({ ...DEFAULT_SETTINGS, paused: true });
    const p = csiPod();
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    expect(readdirSync(req.targetPath)).toHaveLength(3);
  });

  it('refuses a pod whose files are too large with ResourceExhausted and creates nothing', async () => {
    const { root, reconciler, c } = await setup({ maxBytes: 2048 });
    const p = csiPod({ owners: Array.from({ length: 100 }, (_, i) => owner({ name: `o${i}` })) });
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    const r = await c.call('node', 'NodePublishVolume', req);
    expect(r.code).toBe(8);
    expect(r.details).toMatch(/^TooLarge: /);
    expect(existsSync(req.targetPath)).toBe(false);
  });

  it('refuses a symlink at the target and writes nothing through it', async () => {
    const { root, reconciler, c, dir } = await setup();
    const p = csiPod();
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    const outside = path.join(dir, 'outside');
    mkdirSync(outside);
    symlinkSync(outside, req.targetPath);
    const r = await c.call('node', 'NodePublishVolume', req);
    expect(r.code).toBe(9);
    expect(r.details).toMatch(/^UnsafePath: /);
    expect(readdirSync(outside)).toEqual([]);
  });

  it('unpublish removes the files and the target, keeps the kubelet\'s vol_data.json, stops updates, and is idempotent', async () => {
    const { root, reconciler, c, metrics } = await setup();
    const volumes = async () => (await metrics.registry.getSingleMetric('ownerrefs_volumes_tracked')!.get()).values[0]!.value;
    const p = csiPod({ owners: [owner({ name: 'before' })] });
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    expect(await volumes()).toBe(1);
    const un = { volumeId: req.volumeId, targetPath: req.targetPath };
    expect((await c.call('node', 'NodeUnpublishVolume', un)).code).toBe(0);
    expect(readdirSync(path.dirname(req.targetPath))).toEqual(['vol_data.json']);
    expect(await volumes()).toBe(0);
    reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'after' })] } });
    reconciler.resyncAll();
    await reconciler.idle();
    expect(existsSync(req.targetPath)).toBe(false);
    expect((await c.call('node', 'NodeUnpublishVolume', un)).code).toBe(0);
  });

  it('unpublish leaves entries the agent did not write (another user\'s file, a link), and says so', async () => {
    const { root, reconciler, c } = await setup();
    const p = csiPod();
    reconciler.upsert(p);
    const req = kubeletPrepare(root, ref(p));
    expect((await c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    writeFileSync(path.join(req.targetPath, 'not-ours'), 'x');
    chownSync(path.join(req.targetPath, 'not-ours'), process.getuid!() + 1, 0);
    symlinkSync(path.join(req.targetPath, 'ownerReferences'), path.join(req.targetPath, 'link'));
    const r = await c.call('node', 'NodeUnpublishVolume', { volumeId: req.volumeId, targetPath: req.targetPath });
    expect(r.code).toBe(9);
    expect(r.details).toMatch(/^NameTaken: .*did not write/);
    expect(readdirSync(req.targetPath).sort()).toEqual(['link', 'not-ours']);
  });

  it.each([
    { what: 'no volume id', req: { targetPath: '/x' }, says: /volume_id is required/ },
    { what: 'no target path', req: { volumeId: 'v' }, says: /target_path is required/ },
    { what: 'a path the driver never publishes to', req: { volumeId: 'v', targetPath: '/etc' }, says: /not below the kubelet root/ },
  ])('unpublish refuses $what with InvalidArgument', async ({ req, says }) => {
    const { c } = await setup();
    const r = await c.call('node', 'NodeUnpublishVolume', req);
    expect(r.code).toBe(3);
    expect(r.details).toMatch(says);
  });

  it('after a restart, finds its published volumes in the kubelet\'s vol_data.json and keeps them current', async () => {
    const first = await setup();
    const p = csiPod({ owners: [owner({ name: 'before-restart' })] });
    first.reconciler.upsert(p);
    const req = kubeletPrepare(first.root, ref(p));
    expect((await first.c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    // Another driver's volume of the same pod must not be adopted.
    const other = kubeletPrepare(first.root, ref(p), 'secrets');
    writeFileSync(path.join(path.dirname(other.targetPath), 'vol_data.json'), JSON.stringify({ driverName: 'secrets-store.csi.k8s.io', volumeHandle: 'x' }));
    mkdirSync(other.targetPath);
    await first.csi.stop();
    await first.reconciler.close();

    const second = await setup({ root: first.root });
    second.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'after-restart' })] } });
    await waitFor(() => read(req.targetPath).includes('"name":"after-restart"'));
    expect(readdirSync(other.targetPath)).toEqual([]);
    // The restored record keeps publish idempotent and the target guarded.
    expect((await second.c.call('node', 'NodePublishVolume', req)).code).toBe(0);
    expect((await second.c.call('node', 'NodePublishVolume', { ...req, volumeId: 'csi-other' })).code).toBe(6);
    expect(lstatSync(req.targetPath).isDirectory()).toBe(true);
  });
});

describe('CSI socket refusals', () => {
  /** One raw call to a method the driver lacks (a newer kubelet's rpc): its grpc-status. */
  async function callUnknown(socket: string): Promise<unknown> {
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    try {
      return await new Promise((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/csi.v1.Node/NodeExpandVolume', 'content-type': 'application/grpc', te: 'trailers' });
        req.on('response', (h) => resolve(h['grpc-status']));
        req.on('error', reject);
        req.end(Buffer.from([0, 0, 0, 0, 0]));
      });
    } finally {
      session.close();
    }
  }

  it('counts every refused call, and logs them at most five at a burst (a caller in a loop cannot flood the log)', async () => {
    const { socket, lines, metrics } = await setup();
    for (let i = 0; i < 8; i++) expect(await callUnknown(socket)).toBe('12');
    const logged = lines.filter((l) => l.msg === 'refused a call on the CSI socket');
    expect(logged).toHaveLength(5);
    expect(logged[0]).toMatchObject({ level: 40, code: 'UNIMPLEMENTED', err: 'unknown method "/csi.v1.Node/NodeExpandVolume"' });
    expect(await metrics.registry.metrics()).toContain('ownerrefs_csi_requests_total{method="refused",code="UNIMPLEMENTED"} 8');
  });
});

type Req = ReturnType<typeof kubeletPrepare>;
type Pod = ReturnType<typeof csiPod>;
