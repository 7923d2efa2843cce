// Issue 5, attack 4, end to end: kubernetes.io/config.mirror crafted to leave the pods
// directory, on pods created through the API. The API server accepts any value for it
// as long as spec.nodeName is set (it only refuses the annotation without a nodeName, and
// mirror pods referencing secrets or service accounts).
//
// These pods go to a second node name that no kubelet emulator watches, served by a
// second agent process on a kubelet root of our own: the emulator (localcluster/kubelet/emulator.ts)
// trusts the annotation as a path and would mkdir, and on deletion rm -rf, wherever it
// points.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMPTY_DIR_PLUGIN } from '../../agent/files/volume/resolve.ts';
import { agentKubeconfig, startAgentProcess, type AgentProcess } from '../../localcluster/agentproc.ts';
import { clusterInfo, kubeConfig, newNamespace, type TestNamespace } from '../support/cluster.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { fakeOwner, forceDeletePods, podBody, waitForEvent } from './e2e-support.ts';
import { deepSnapshot } from './support.ts';

const MIRROR = 'kubernetes.io/config.mirror';
// No Node object has this agent's node name, so there is no nodeOwnerReferences.
const FILES = ['dependentOwnerReferences', 'ownerReferences', 'ownerReferences.env'];

describe('mirror-pod annotations crafted to leave the pods directory', () => {
  let core: CoreV1Api;
  let ns: TestNamespace;
  let agent: AgentProcess;
  let node: string;
  let base: string; // holds root/ and outside/
  let root: string;
  const volumeOf = (diskUid: string, name = 'podinfo') => path.join(root, 'pods', diskUid, 'volumes', EMPTY_DIR_PLUGIN, name);
  const diagnostics = () => agent.report();
  const create = (name: string, mirror: string | undefined, extra: Partial<Parameters<typeof podBody>[1]> = {}) =>
    core.createNamespacedPod({ namespace: ns.name, body: podBody(name, {
      nodeName: node, owners: [fakeOwner({ name: 'attacker-chosen' })], ...extra,
      annotations: { ...(mirror === undefined ? {} : { [MIRROR]: mirror }), ...extra.annotations },
    }) });

  beforeAll(async () => {
    const kc = kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    node = `${clusterInfo().nodeName}-mirror`;
    ns = await newNamespace('secm', kc);
    base = mkdtempSync(path.join(os.tmpdir(), 'sec-mirror-'));
    root = path.join(base, 'kubelet');
    mkdirSync(path.join(root, 'pods'), { recursive: true });
    mkdirSync(path.join(base, 'outside'));
    writeFileSync(path.join(base, 'outside', 'secret'), 'host data', { mode: 0o600 });
    agent = await startAgentProcess({ kubeconfig: await agentKubeconfig(kc, base, { nodeName: node }), nodeName: node, kubeletRoot: root });
    await waitFor(async () => (await agent.get('/readyz')).status === 200, { describe: 'second agent ready', diagnostics });
  });

  afterAll(async () => {
    if (ns) await forceDeletePods(core, ns.name, node);
    await agent?.stop();
    await ns?.cleanup();
    if (base) rmSync(base, { recursive: true, force: true });
  });

  it('every traversing value is accepted by the API server, refused by the agent with an Event, and writes nothing', async () => {
    const values = ['..', '.', '../decoy', '../../outside', 'BASE/outside', '/etc', 'a/b', '', ' ', '..%2f..%2foutside',
      'x'.repeat(200), 'ünï', 'f00d\n', 'f00d\u0000', '.hidden'];
    // A decoy volume directory wherever a naive join would land, inside this test's base directory.
    for (const v of values) {
      const naive = path.resolve(root, 'pods', v.replace('BASE', base), 'volumes', EMPTY_DIR_PLUGIN, 'podinfo');
      if (!naive.startsWith(base + path.sep) || naive.includes('\0') || naive.length > 1000) continue;
      mkdirSync(naive, { recursive: true, mode: 0o777 });
      writeFileSync(path.join(naive, 'sentinel'), 'decoy');
    }
    const hash = '0123456789abcdef0123456789abcdef'; // a static pod, as the kubelet names it: served
    mkdirSync(volumeOf(hash), { recursive: true, mode: 0o777 });
    const before = deepSnapshot(base);

    const bad: V1Pod[] = [];
    for (const [i, v] of values.entries()) bad.push(await create(`mirror-${i}`, v.replace('BASE', base)));
    expect(bad.map((p) => p.metadata!.annotations![MIRROR])).toEqual(values.map((v) => v.replace('BASE', base))); // all got through
    const good = await create('static', hash, { owners: [fakeOwner({ name: 'static-owner' })] });
    await waitFor(() => { try { return readFileSync(path.join(volumeOf(hash), 'ownerReferences'), 'utf8').includes('"static-owner"'); } catch { return false; } },
      { describe: 'static pod served', diagnostics });
    for (const p of bad) await waitForEvent(core, ns.name, p, /^InvalidMirrorUID: kubernetes\.io\/config\.mirror ".*" is not a valid pod UID/s, diagnostics);
    expect(good.metadata!.uid).not.toBe(hash);

    // Nothing changed under base (kubelet root, decoys, outside) but the static pod's files.
    const after = deepSnapshot(base);
    const changed = Object.keys({ ...before, ...after }).filter((p) => before[p] !== after[p]);
    expect(changed.sort()).toEqual([volumeOf(hash), ...FILES.map((f) => path.join(volumeOf(hash), f))].sort());
  });

  // Regression (was a defect, now fixed): see test/security/mirror.test.ts. A pod created through the API names another
  // pod's UID in kubernetes.io/config.mirror and declares an emptyDir of the victim's volume
  // name: the agent writes the attacker's ownerReferences into the victim's volume (a pod
  // that never opted in), and no Event says anything. Fix: refuse a mirror value equal to
  // another pod's metadata.uid on the node, and refuse two pods resolving to one directory.
  it('a mirror value naming another pod\'s UID leaves that pod\'s volume alone', async () => {
    const body = podBody('victim', { nodeName: node, volumes: [{ name: 'data', emptyDir: {} }] });
    delete body.metadata!.annotations; // the victim never opted in
    const victim = await core.createNamespacedPod({ namespace: ns.name, body });
    const victimVol = volumeOf(victim.metadata!.uid!, 'data');
    mkdirSync(victimVol, { recursive: true, mode: 0o777 }); // what the kubelet does for the victim
    writeFileSync(path.join(victimVol, 'app.conf'), 'the victim\'s data');
    const before = deepSnapshot(victimVol);
    const attacker = await create('attacker', victim.metadata!.uid!, {
      annotations: { 'ownerrefs.dev/volume': 'data' }, volumes: [{ name: 'data', emptyDir: {} }],
    });
    // Either outcome ends the wait: the agent refuses with an Event, or files land in the victim's volume.
    await waitFor(async () => Object.keys(deepSnapshot(victimVol)).length > 2 ||
      (await core.listNamespacedEvent({ namespace: ns.name, fieldSelector: 'involvedObject.name=attacker' })).items.length > 0,
    { describe: 'the agent acted on the attacker', diagnostics });
    expect(deepSnapshot(victimVol)).toEqual(before);
    await waitForEvent(core, ns.name, attacker, /^InvalidMirrorUID: /, diagnostics);
  });
});
