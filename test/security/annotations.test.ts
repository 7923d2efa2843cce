// Attack 3 (issue 5), unit level: hostile values of ownerrefs.dev/volume, and the annotation
// naming a volume that is not an emptyDir. For each, a decoy directory waits wherever a
// naive agent (one that joined the value into a path) would write, and a good pod is
// served alongside. Nothing under the kubelet root but the good pod's files may change,
// and the bad pod gets a Warning Event saying what to fix.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EMPTY_DIR_PLUGIN } from '../../agent/files/volume/resolve.ts';
import { FILES, project } from '../../projections/index.ts';

import { agentKit } from '../support/agentkit.ts';
import { owner, pod } from '../support/fixtures.ts';
import { makeVolume } from '../support/tmpdir.ts';
import { waitFor } from '../../localcluster/wait.ts';
import { deepSnapshot } from './support.ts';
import { type PodView } from '../../agent/node/podview.ts';

const FIX = {
  InvalidAnnotation: /set it to the name of an emptyDir volume/,
  UnsupportedVolumeType: /only writes into emptyDir volumes \(use emptyDir/,
  VolumeNotDeclared: /add an emptyDir volume/,
} as const;

/** Creates a decoy directory (0777, with a sentinel) at p if p is inside root. */
function decoy(root: string, p: string): void {
  const rel = path.relative(root, p);
  if (rel.startsWith('..') || path.isAbsolute(rel) || p.includes('\0') || path.basename(p).length > 255 || existsSync(p)) return;
  mkdirSync(p, { recursive: true, mode: 0o777 });
  writeFileSync(path.join(p, 'sentinel'), 'decoy');
}

/** Runs bad pods beside a good one; returns after the good pod is served and the agent is idle. */
async function runBeside(build: PodView[] | ((root: string) => PodView[]), prepare: (root: string, p: PodView) => void = () => {}) {
  const k = agentKit();
  const bad = typeof build === 'function' ? build(k.root) : build;
  const good = pod({ name: 'good', owners: [owner({ name: 'served' })] });
  const goodVol = makeVolume(k.root, good.metadata!.uid!);
  for (const p of bad) {
    makeVolume(k.root, p.metadata!.uid!); // the bad pod's own emptyDir exists too (where one is declared)
    prepare(k.root, p);
  }
  const before = deepSnapshot(k.root);
  k.reconciler.replace([...bad, good]);
  const want = project(good);
  await waitFor(() => want.every((f) => existsSync(path.join(goodVol, f.path))), { describe: 'good pod served' });
  await k.reconciler.idle();
  // Everything under the kubelet root is as it was, except the good pod's volume.
  const after = deepSnapshot(k.root);
  const changed = Object.keys({ ...before, ...after }).filter((p) => before[p] !== after[p]);
  expect(changed.sort()).toEqual([goodVol, ...want.map((f) => path.join(goodVol, f.path))].sort());
  return k;
}

const volBase = (root: string, p: PodView) => path.join(root, 'pods', p.metadata!.uid!, 'volumes', EMPTY_DIR_PLUGIN);

describe('a hostile ownerrefs.dev/volume value', () => {
  const cases: { what: string; value: string }[] = [
    { what: 'parent directory', value: '..' },
    { what: 'current directory', value: '.' },
    { what: 'relative traversal', value: '../../../../decoy' },
    { what: 'traversal after a valid name', value: 'podinfo/../../decoy' },
    { what: 'traversal into another plugin', value: '../kubernetes.io~configmap/podinfo' },
    { what: 'absolute path', value: '/etc/kubernetes' },
    { what: 'absolute path inside the kubelet root', value: 'ROOT/decoy' },
    { what: 'a separator', value: 'a/b' },
    { what: 'empty', value: '' },
    { what: 'blank', value: '   ' },
    { what: 'only a comma', value: ',' },
    { what: 'empty parts', value: ',,,' },
    { what: 'upper case', value: 'PodInfo' },
    { what: '64 characters', value: 'x'.repeat(64) },
    { what: '100 000 characters', value: 'y'.repeat(100_000) },
    { what: 'non-ASCII', value: 'ünïcødé-日本' },
    { what: 'a NUL', value: 'pod\0info' },
    { what: 'a newline', value: 'pod\ninfo' },
    { what: 'a line separator', value: 'pod\u2028info' },
    { what: 'percent-encoded dots', value: '%2e%2e' },
    { what: 'a hidden name', value: '.hidden' },
    { what: 'a tilde', value: '~root' },
    { what: 'the plugin directory name', value: EMPTY_DIR_PLUGIN },
    { what: 'nine volumes', value: Array.from({ length: 9 }, (_, i) => `v${i}`).join(',') },
  ];

  it.each(cases)('$what: InvalidAnnotation with a fix, nothing written, good pod served', async ({ value: template }) => {
    const k = await runBeside((root) => {
      const value = template.replace('ROOT', root); // an absolute path into this test's kubelet root
      // The pod declares an emptyDir of each (invalid) name, so only the annotation check stands in the way.
      const names = value.split(',').map((s) => s.trim());
      return [pod({ name: 'bad', annotation: value, volumes: names.map((name) => ({ name, emptyDir: {} })) })];
    }, (root, p) => {
      for (const n of p.metadata!.annotations!['ownerrefs.dev/volume']!.split(',')) decoy(root, path.resolve(volBase(root, p), n.trim()));
    });
    const mine = k.events.sent.filter((e) => e.obj.name === 'bad');
    expect(mine.length).toBeGreaterThan(0);
    for (const e of mine) {
      expect(e.reason).toBe('OwnerRefsProjectionFailed');
      expect(e.message).toMatch(/^InvalidAnnotation: /);
      expect(e.message).toMatch(/set it to the name of an emptyDir volume|at most 8 are allowed/);
      expect(e.message.length).toBeLessThan(600); // pod text quoted, but bounded
    }
  });

  it('serves the valid name in a list and reports the empty and hostile ones', async () => {
    const bad = pod({ name: 'bad', annotation: 'podinfo,,../../x', owners: [owner({ name: 'mixed' })] });
    const k = agentKit();
    const vol = makeVolume(k.root, bad.metadata!.uid!);
    k.reconciler.upsert(bad);
    await waitFor(() => existsSync(path.join(vol, FILES.ownerReferences)));
    await k.reconciler.idle();
    expect(k.events.sent.map((e) => e.message)).toEqual([
      expect.stringMatching(/^InvalidAnnotation: .*"" is not a valid volume name/),
      expect.stringMatching(/^InvalidAnnotation: .*"\.\.\/\.\.\/x" is not a valid volume name/),
    ]);
  });
});

describe('the annotation naming a volume that is not an emptyDir', () => {
  const plugins: Record<string, string> = {
    hostPath: 'kubernetes.io~host-path', configMap: 'kubernetes.io~configmap', secret: 'kubernetes.io~secret',
    projected: 'kubernetes.io~projected', csi: 'kubernetes.io~csi', downwardAPI: 'kubernetes.io~downward-api',
    persistentVolumeClaim: 'kubernetes.io~local-volume', ephemeral: 'kubernetes.io~csi',
  };
  it.each(Object.keys(plugins))('%s: UnsupportedVolumeType with a fix; neither its directory nor an emptyDir path is written', async (type) => {
    const bad = pod({ name: 'bad', volumes: [{ name: 'podinfo', [type]: {} }] });
    const k = await runBeside([bad], (root, p) => {
      decoy(root, path.join(root, 'pods', p.metadata!.uid!, 'volumes', plugins[type]!, 'podinfo'));
      decoy(root, path.join(volBase(root, p), 'podinfo', 'x')); // where a naive agent would go (with a sentinel in it)
    });
    expect(k.events.sent.filter((e) => e.obj.name === 'bad').map((e) => e.message))
      .toEqual([expect.stringMatching(/^UnsupportedVolumeType: volume "podinfo": /)]);
    expect(k.events.sent[0]!.message).toMatch(FIX.UnsupportedVolumeType);
  });

  it('a volume the pod does not declare: VolumeNotDeclared with a fix', async () => {
    const k = await runBeside([pod({ name: 'bad', annotation: 'nosuch' })], (root, p) => decoy(root, path.join(volBase(root, p), 'nosuch')));
    expect(k.events.sent.map((e) => e.message)).toEqual([expect.stringMatching(FIX.VolumeNotDeclared)]);
  });
});
