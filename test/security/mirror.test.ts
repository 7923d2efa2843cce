// Attack 4 (issue 5), unit level: the kubernetes.io/config.mirror annotation chooses the
// on-disk pod directory, and the API server accepts any value for it on a pod created
// with spec.nodeName set (pods.e2e.test.ts shows which). Traversal must be
// refused with InvalidMirrorUID, and - the defect below - a mirror value naming another
// pod's UID must not lead the agent into that pod's volume.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { targetFor } from '../../agent/files/csi/paths.ts';
import { EMPTY_DIR_PLUGIN } from '../../agent/files/volume/resolve.ts';
import { FILES } from '../../projections/index.ts';
import { agentKit } from '../support/agentkit.ts';
import { owner, pod } from '../support/fixtures.ts';
import { makeVolume } from '../support/tmpdir.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { deepSnapshot } from './support.ts';
import { ANNOTATION_MIRROR } from '../../projections/names.ts';

const mirrorPod = (mirror: string, name = 'mirror') =>
  pod({ name, annotations: { [ANNOTATION_MIRROR]: mirror }, owners: [owner({ name: 'evil-owner' })] });

describe('a hostile kubernetes.io/config.mirror value', () => {
  const values: { what: string; value: string }[] = [
    { what: 'parent directory', value: '..' },
    { what: 'current directory', value: '.' },
    { what: 'traversal to a sibling of pods/', value: '../decoy' },
    { what: 'traversal out of the kubelet root', value: '../../decoy' },
    { what: 'traversal after a valid uid', value: 'f00d/../../decoy' },
    { what: 'an absolute path into the kubelet root', value: 'ROOT/decoy' },
    { what: 'an absolute host path', value: '/etc' },
    { what: 'empty', value: '' },
    { what: 'blank', value: ' ' },
    { what: 'a hidden name', value: '.f00d' },
    { what: 'percent-encoded traversal', value: '..%2f..%2fdecoy' },
    { what: '129 characters', value: 'a'.repeat(129) },
    { what: 'non-ASCII', value: 'ünï-日本' },
    { what: 'a newline', value: 'f00d\n' },
    { what: 'a NUL', value: 'f00d\0' },
  ];

  it.each(values)('$what: InvalidMirrorUID naming the annotation, nothing written, a good pod served', async ({ value: template }) => {
    const k = agentKit();
    const value = template.replace('ROOT', k.root);
    const bad = mirrorPod(value);
    // A decoy volume directory wherever a naive path join would land, if that is inside the kubelet root.
    const naive = path.resolve(k.root, 'pods', value, 'volumes', EMPTY_DIR_PLUGIN, 'podinfo');
    if (naive.startsWith(k.root + path.sep) && !naive.includes('\0')) {
      mkdirSync(naive, { recursive: true, mode: 0o777 });
      writeFileSync(path.join(naive, 'sentinel'), 'decoy');
    }
    makeVolume(k.root, bad.metadata!.uid!); // even its API uid's directory stays untouched
    const good = pod({ name: 'good' });
    const goodVol = makeVolume(k.root, good.metadata!.uid!);
    const before = deepSnapshot(k.root);
    k.reconciler.replace([bad, good]);
    await waitFor(() => existsSync(path.join(goodVol, FILES.ownerReferences)));
    await k.reconciler.idle();
    const after = deepSnapshot(k.root);
    expect(Object.keys(after).filter((p) => after[p] !== before[p] && !p.startsWith(goodVol))).toEqual([]);
    expect(k.events.sent.map((e) => [e.obj.name, e.reason, e.message])).toEqual([
      ['mirror', 'OwnerRefsProjectionFailed', expect.stringMatching(/^InvalidMirrorUID: kubernetes\.io\/config\.mirror ".*" is not a valid pod UID/s)],
    ]);
  });

  it('a static pod (mirror = the kubelet\'s hash) is served in the hash\'s directory', async () => {
    const k = agentKit();
    const hash = '0123456789abcdef0123456789abcdef';
    const p = mirrorPod(hash);
    const vol = makeVolume(k.root, hash);
    k.reconciler.upsert(p);
    await waitFor(() => existsSync(path.join(vol, FILES.ownerReferences)));
    expect(readdirSync(path.join(k.root, 'pods'))).toEqual([hash]);
  });

  // Regression (was a defect, now fixed): the agent trusts kubernetes.io/config.mirror to name the pod's own directory.
  // Any pod created through the API with spec.nodeName may carry it (the API server
  // accepts any value; only the kubelet's orphan clean-up deletes such a pod later),
  // so a hostile pod that knows a victim pod's UID (UIDs are not secret: they appear
  // in ownerReferences, Events and logs) names it, declares an emptyDir of the victim's
  // volume name, and the agent writes the attacker's ownerReferences into the VICTIM's
  // volume - a pod that never opted in - with no Event. A victim that did opt in gets
  // the attacker's owners instead of its own (the two pods overwrite each other), which
  // misdirects the victim's own objects to owners of the attacker's choosing.
  // Fix (agent/files/reconciler.ts + agent/files/volume/resolve.ts): keep the metadata.uid of every pod on
  // the node (not only opted-in ones: a Set of strings), and refuse with InvalidMirrorUID
  // a mirror value that equals the metadata.uid of any other pod on the node; also refuse
  // (both pods) when two tracked pods resolve to the same volume directory, instead of
  // the silent `if (this.#byDir.has(dir)) continue` in #setVolumes.
  it('a mirror value naming another pod\'s UID: the victim\'s volume is untouched, and the attacker gets an Event', async () => {
    const k = agentKit();
    const victim = pod({ name: 'victim', annotation: undefined, volumes: [{ name: 'data', emptyDir: {} }] });
    const victimVol = makeVolume(k.root, victim.metadata!.uid!, 'data');
    writeFileSync(path.join(victimVol, 'app.conf'), 'the victim\'s own data');
    const attacker = pod({
      name: 'attacker', annotation: 'data', volumes: [{ name: 'data', emptyDir: {} }],
      annotations: { [ANNOTATION_MIRROR]: victim.metadata!.uid! }, owners: [owner({ name: 'attacker-chosen-owner' })],
    });
    const before = deepSnapshot(victimVol);
    k.reconciler.replace([victim, attacker]);
    // Either outcome ends the wait: files land in the victim's volume, or the agent reports.
    await waitFor(() => k.events.sent.length > 0 || existsSync(path.join(victimVol, FILES.ownerReferences)));
    await k.reconciler.idle();
    expect(readdirSync(victimVol)).toEqual(['app.conf']);
    expect(deepSnapshot(victimVol)).toEqual(before);
    expect(k.events.sent).toEqual([expect.objectContaining({
      obj: expect.objectContaining({ name: 'attacker' }), message: expect.stringMatching(/^InvalidMirrorUID: /),
    })]);
  });

  // Regression (was a defect; fixed by agent/files/diskclaims.ts; same root cause, CSI mode): Reconciler.#track does #byDisk.set(diskUid, uid), last
  // pod wins, and publish() serves whatever pod #byDisk names. A pod with the driver's inline
  // volume and kubernetes.io/config.mirror set to the victim's UID, seen after the victim, so
  // captures the victim's CSI volume: the kubelet's NodePublishVolume for the victim gets the
  // attacker's owners. Fix: as above - refuse a mirror value that is another pod's
  // metadata.uid, and never let a second pod take over a #byDisk entry.
  it('CSI mode: a mirror value naming another pod\'s UID does not capture that pod\'s CSI volume', async () => {
    const driver = 'ownerrefs.dev';
    const k = agentKit({ csiDriver: driver });
    const volumes = [{ name: 'podinfo', csi: { driver } }];
    const victim = pod({ name: 'victim', annotation: undefined, volumes, owners: [owner({ name: 'victim-owner' })] });
    const uid = victim.metadata!.uid!;
    const attacker = pod({ name: 'attacker', annotation: undefined, volumes, annotations: { [ANNOTATION_MIRROR]: uid },
      owners: [owner({ name: 'attacker-chosen-owner' })] });
    k.reconciler.upsert(victim);
    k.reconciler.upsert(attacker);
    const t = targetFor(k.root, uid, 'podinfo'); // what the kubelet publishes for the victim
    mkdirSync(path.join(k.root, ...t.target.components.slice(0, -1)), { recursive: true, mode: 0o750 });
    await k.reconciler.publish(uid, 'podinfo', t.target).catch(() => false);
    const written = readFileSync(path.join(k.root, ...t.target.components, FILES.ownerReferences), 'utf8');
    expect(written).toContain('"victim-owner"');
  });
});
