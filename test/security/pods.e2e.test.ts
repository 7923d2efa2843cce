// Issue 5 end to end: hostile pods created straight onto the test node (spec.nodeName set),
// against the real API server and the agent process with its shipped RBAC. Mirror-pod
// attacks are in mirror.e2e.test.ts (they need a node no kubelet emulator serves).
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiStatus } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { buildOracle, goMarshal } from '../support/gooracle.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { fakeOwner, nonDirectories, podBody, projectionEvents, sourceIn, waitForEvent, type PodOpts } from './e2e-support.ts';

describe('hostile pods on the node', () => {
  const e = useE2E('sec');
  beforeAll(() => buildOracle(), 120_000);
  const create = (name: string, o: Omit<PodOpts, 'nodeName'> = {}) =>
    e.core.createNamespacedPod({ namespace: e.ns, body: podBody(name, { nodeName: e.nodeName, ...o }) });
  const FIX_ANNOTATION = /^InvalidAnnotation: .*(set it to the name of an emptyDir volume|at most 8 are allowed)/s;
  const FIX_TYPE = /^UnsupportedVolumeType: volume "podinfo": .*only writes into emptyDir volumes \(use emptyDir/;

  // What hostile input cannot even reach the agent (dry-run: nothing is created either way).
  it.each([
    { what: 'apiVersion with two slashes', o: { owners: [fakeOwner({ apiVersion: 'a/b/c' })] }, code: 422, msg: /version must not be empty/ },
    { what: 'an empty owner name', o: { owners: [fakeOwner({ name: '' })] }, code: 422, msg: /ownerReferences\.name: Invalid value: "": must not be empty/ },
    { what: 'two controllers', o: { owners: [fakeOwner({ controller: true }), fakeOwner({ uid: 'u2', controller: true })] }, code: 422, msg: /Only one reference can have Controller set to true/ },
    { what: 'annotations over 256 KiB', o: { annotations: { 'ownerrefs.dev/volume': 'a'.repeat(300_000) } }, code: 422, msg: /Too long: may not be more than 262144 bytes/ },
    { what: '50 000 ownerReferences (request over 3 MiB)', o: { owners: Array.from({ length: 50_000 }, (_, i) => fakeOwner({ uid: `u${i}` })) }, code: 413, msg: /too large/i },
    { what: 'a mirror pod with a secret volume', o: { annotations: { 'kubernetes.io/config.mirror': 'x' }, volumes: [{ name: 'podinfo', secret: { secretName: 's' } }] }, code: 403, msg: /mirror pod may not reference secrets/ },
  ] as { what: string; o: Omit<PodOpts, 'nodeName'>; code: number; msg: RegExp }[])('the API server refuses $what', async ({ o, code, msg }) => {
    const err = await e.core.createNamespacedPod({ namespace: e.ns, body: podBody('refused', { nodeName: e.nodeName, ...o }), dryRun: 'All' })
      .then(() => undefined, (x: unknown) => x);
    expect(apiStatus(err)).toBe(code);
    expect((JSON.parse(String((err as { body?: unknown }).body)) as { message: string }).message).toMatch(msg);
  });

  it('bad annotations and non-emptyDir volumes: a Warning Event with a fix each, and only the good pod\'s files on disk', async () => {
    const root = e.kubelet.kubeletRoot;
    // A decoy where "../../../../decoy" from a volume's parent would land, if it were ever joined into a path.
    mkdirSync(path.join(root, 'decoy'), { mode: 0o777 });
    writeFileSync(path.join(root, 'decoy', 'sentinel'), 'decoy');
    const annotations = ['../../../../decoy', '/etc/kubernetes', '..', '.', 'podinfo/../x', 'a,,b', ' ', 'PodInfo', 'x'.repeat(300),
      'ünïcødé', 'pod\ninfo', 'pod\u0000info', '%2e%2e', Array.from({ length: 9 }, (_, i) => `v${i}`).join(',')];
    const types = [
      { hostPath: { path: '/' } }, { configMap: { name: 'absent', optional: true } }, { secret: { secretName: 'absent', optional: true } },
      { projected: { sources: [{ downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }] } },
      { csi: { driver: 'csi.security.example' } },
    ];
    const bad: { pod: V1Pod; fix: RegExp }[] = [];
    for (const [i, a] of annotations.entries()) bad.push({ pod: await create(`ann-${i}`, { annotations: { 'ownerrefs.dev/volume': a } }), fix: FIX_ANNOTATION });
    for (const [i, t] of types.entries()) bad.push({ pod: await create(`type-${i}`, { volumes: [{ name: 'podinfo', ...t }] }), fix: FIX_TYPE });
    const good = await create('good', { owners: [fakeOwner({ name: 'served' })] });

    await e.waitForFile(good, (t) => t.includes('"served"'), 'good pod served');
    for (const { pod, fix } of bad) {
      const ev = await waitForEvent(e.core, e.ns, pod, fix);
      expect(ev).toMatchObject({ type: 'Warning', involvedObject: { kind: 'Pod', uid: pod.metadata!.uid }, source: { component: 'ownerrefs-agent' } });
      expect(ev.message!.length).toBeLessThanOrEqual(1024);
    }
    // The whole kubelet root holds nothing but the agent's kubeconfig, our decoy, and the good pod's four files.
    const goodVol = e.kubelet.volumeDir(good.metadata!.uid!, 'podinfo');
    expect(nonDirectories(root)).toEqual([
      path.join(root, 'agent.kubeconfig'), path.join(root, 'decoy', 'sentinel'),
      ...['dependentOwnerReferences', 'nodeOwnerReferences', 'ownerReferences', 'ownerReferences.env'].map((f) => path.join(goodVol, f)),
    ].sort());
    expect(readFileSync(path.join(root, 'decoy', 'sentinel'), 'utf8')).toBe('decoy');
  });

  it('the nastiest owner fields the API server accepts: written exactly as Go would, and the env file runs nothing', async () => {
    const marker = path.join(e.kubelet.kubeletRoot, 'pwned');
    const nasty = `'; touch ${marker}; '$(touch ${marker})\`touch ${marker}\`"\\\n\t\r\u0000\u0001\u001b\u007f\u2028\u2029<>&ünï 🎉 ${'$'}{HOME}`;
    // apiVersion may hold at most one '/' (the API server parses group/version); name, kind and uid anything non-empty.
    const owners = [
      fakeOwner({ name: nasty, kind: nasty, uid: nasty, apiVersion: `g.example/v1'$(id)\`id\`\n\u0000` }),
      fakeOwner({ name: "it's", kind: '"quoted"', uid: '\\', controller: true, blockOwnerDeletion: false }),
      fakeOwner({ name: '../../etc/passwd', kind: '/abs', uid: ' ' }),
    ];
    const created = await create('nasty', { owners });
    const stored = (await e.core.readNamespacedPod({ name: 'nasty', namespace: e.ns })).metadata!.ownerReferences!;
    expect(stored.map((o) => o.name)).toEqual(owners.map((o) => o.name)); // accepted verbatim, NUL and all
    const want = goMarshal(stored.map(({ apiVersion, kind, name, uid, controller, blockOwnerDeletion }) =>
      ({ apiVersion, kind, name, uid, controller, blockOwnerDeletion })));
    const text = await e.waitForFile(created, (t) => t === want, 'exactly what Go encoding/json writes');
    const env = e.file(created, 'ownerReferences.env')!;
    for (const shell of ['/bin/sh', 'bash']) expect(sourceIn(shell, env, e.kubelet.kubeletRoot)).toBe(text);
    expect(() => readFileSync(marker)).toThrow(/ENOENT/);
    expect(JSON.parse(e.file(created, 'dependentOwnerReferences')!)).toEqual(stored.map(({ apiVersion, kind, name, uid }) => ({ apiVersion, kind, name, uid })));
  });

  // Regression (was a defect, now fixed): see test/security/watch-utf8.test.ts. A watch event of this size reaches the
  // agent in several reads; Reflector.#consume decodes each on its own, so characters cut
  // at a read boundary become U+FFFD and the file misnames the owner. Fix: a StringDecoder
  // across chunks in agent/kube/reflector.ts.
  it('long non-ASCII owner names arriving by watch are written exactly', async () => {
    const pods: V1Pod[] = [];
    for (let i = 0; i < 4; i++) pods.push(await create(`emoji-${i}`, { owners: [fakeOwner({ name: `${i}-${'🎉'.repeat(20_000)}` })] }));
    for (const p of pods) {
      const stored = (await e.core.readNamespacedPod({ name: p.metadata!.name!, namespace: e.ns })).metadata!.ownerReferences!;
      const want = goMarshal(stored.map(({ apiVersion, kind, name, uid }) => ({ apiVersion, kind, name, uid })));
      const text = await e.waitForFile(p, (t) => t.length > 1000, 'written');
      expect({ replacementChars: text.split('\ufffd').length - 1, exact: text === want }).toEqual({ replacementChars: 0, exact: true });
    }
  });

  it('30 000 ownerReferences: TooLarge, nothing written for it; the agent stays healthy and serves others', async () => {
    // Distinct uids: thousands of identical ones make the API server time out (504) on create.
    const big = await create('big', { owners: Array.from({ length: 30_000 }, (_, i) => fakeOwner({ name: `n${i}`, uid: `u${i}` })) });
    const ev = await waitForEvent(e.core, e.ns, big, /^TooLarge: /);
    expect(ev.message).toMatch(/render to \d+ bytes, over the agent's limit of 262144/);
    const other = await create('after-big', { owners: [fakeOwner({ name: 'v1' })] });
    await e.waitForFile(other, (t) => t.includes('"v1"'), 'a pod created after the big one is served');
    expect(e.file(big)).toBeUndefined();
    expect((await e.agent.get('/healthz')).status).toBe(200);
    expect(await e.agent.metric('ownerrefs_process_resident_memory_bytes')).toBeLessThan(512 << 20);
  });

  it('a pod that keeps failing gets a bounded number of Events and log lines, whatever it does', async () => {
    const started = Date.now();
    const p = await create('failing', { owners: [fakeOwner({ name: 'f0' })] });
    const vol = await e.kubelet.waitForVolumeDir(p.metadata!.uid!, 'podinfo');
    mkdirSync(path.join(vol, '.ownerrefs-tmp.ownerReferences')); // NameTaken on every sync of ownerReferences
    const failures = () => e.agent.metric('ownerrefs_projection_failures_total', 'reason="NameTaken"');
    await e.core.patchNamespacedPod({ name: 'failing', namespace: e.ns, body: { metadata: { ownerReferences: [fakeOwner({ name: 'f1' })] } } }, mergePatch);
    await waitForEvent(e.core, e.ns, p, /^NameTaken: /);
    for (let i = 2; i < 32; i++) { // every owner change is a new sync, and a new failure
      const before = await failures();
      await e.core.patchNamespacedPod({ name: 'failing', namespace: e.ns, body: { metadata: { ownerReferences: [fakeOwner({ name: `f${i}` })] } } }, mergePatch);
      await waitFor(async () => (await failures()) > before, { describe: `failure ${i} counted` });
    }
    const minutes = (Date.now() - started) / 60_000;
    expect(await failures()).toBeGreaterThanOrEqual(30);
    // Burst of 3, then one per 2 minutes (Events) and one a minute (logs).
    expect((await projectionEvents(e.core, e.ns, 'failing')).length).toBeLessThanOrEqual(3 + Math.ceil(minutes / 2));
    const warns = e.agent.lines.filter((l) => l.pod === `${e.ns}/failing` && l.level === 40);
    expect(warns.length).toBeLessThanOrEqual(3 + Math.ceil(minutes));
    expect(e.file(p, 'ownerReferences.env')).toContain('"f31"'); // the other files keep up
  });

  // Regression test for the hot loop in test/security/flooding.test.ts (fixed in 76cbb1f).
  it('a directory planted at ownerReferences is retried with backoff, not in a hot loop', async () => {
    const p = await create('hotloop', { owners: [fakeOwner({ name: 'h' })] });
    await e.waitForFile(p, (t) => t.includes('"h"'), 'written');
    const target = path.join(e.kubelet.volumeDir(p.metadata!.uid!, 'podinfo'), 'ownerReferences');
    await waitFor(() => { // swap the file for a directory (the agent may restore it in between: retry)
      try { rmSync(target, { force: true }); mkdirSync(target); return true; } catch { return false; }
    }, { describe: 'directory planted' });
    await e.core.patchNamespacedPod({ name: 'hotloop', namespace: e.ns, body: { metadata: { ownerReferences: [fakeOwner({ name: 'h2' })] } } }, mergePatch);
    await waitForEvent(e.core, e.ns, p, /^NameTaken: /);
    const failures = () => e.agent.metric('ownerrefs_projection_failures_total', 'reason="NameTaken"');
    const before = await failures();
    await new Promise((r) => setTimeout(r, 3000));
    // Backoff of 0.5 s, 1 s, 2 s, ... allows a handful of retries in 3 s; a loop allows hundreds.
    expect((await failures()) - before).toBeLessThan(20);
  });
});
