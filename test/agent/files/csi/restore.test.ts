// After a restart the agent finds the targets it had published from the kubelet's own
// records (vol_data.json), and nothing else.
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findPublished } from '../../../../agent/files/csi/restore.ts';
import { memoryLogger } from '../../../support/agentkit.ts';
import { tmpDir } from '../../../support/tmpdir.ts';

const DRIVER = 'ownerrefs.dev';
const UID = '6be1683f-da9c-4f68-9440-82376231cfa6';

/** A CSI volume directory as the kubelet leaves it: vol_data.json, and mount/ once published. */
function volume(root: string, uid: string, name: string, data: unknown, mounted = true): string {
  const dir = path.join(root, 'pods', uid, 'volumes', 'kubernetes.io~csi', name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'vol_data.json'), typeof data === 'string' ? data : JSON.stringify(data));
  if (mounted) mkdirSync(path.join(dir, 'mount'));
  return dir;
}

describe('findPublished', () => {
  it('finds each mounted volume of this driver, with its target and volume handle', async () => {
    const root = tmpDir('kubelet-');
    volume(root, UID, 'podinfo', { driverName: DRIVER, volumeHandle: 'csi-abc' });
    const found = await findPublished(root, DRIVER, memoryLogger().log);
    expect(found).toEqual([{
      diskUid: UID, volume: 'podinfo', volumeId: 'csi-abc',
      targetPath: path.join(root, 'pods', UID, 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount'),
      target: { root, components: ['pods', UID, 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount'] },
    }]);
  });

  it.each([
    { what: "another driver's volume", setup: (r: string) => volume(r, UID, 'v', { driverName: 'other.dev', volumeHandle: 'x' }) },
    { what: 'a volume not yet published (no mount/)', setup: (r: string) => volume(r, UID, 'v', { driverName: DRIVER }, false) },
    { what: 'a pod directory whose name is not a pod UID', setup: (r: string) => volume(r, '.hidden', 'v', { driverName: DRIVER }) },
    { what: 'a volume directory whose name is not a volume name', setup: (r: string) => volume(r, UID, 'Bad_Name', { driverName: DRIVER }) },
    { what: 'vol_data.json that is a symlink', setup: (r: string) => {
      const dir = volume(r, UID, 'v', { driverName: DRIVER });
      writeFileSync(path.join(r, 'elsewhere.json'), JSON.stringify({ driverName: DRIVER }));
      const f = path.join(dir, 'vol_data.json');
      rmSync(f);
      symlinkSync(path.join(r, 'elsewhere.json'), f);
    } },
    { what: 'vol_data.json over 64 KiB', setup: (r: string) => volume(r, UID, 'v', JSON.stringify({ driverName: DRIVER, pad: 'x'.repeat(70_000) })) },
    { what: 'an empty kubelet root', setup: () => undefined },
  ])('skips $what', async ({ setup }) => {
    const root = tmpDir('kubelet-');
    setup(root);
    expect(await findPublished(root, DRIVER, memoryLogger().log)).toEqual([]);
  });

  it('logs and skips a vol_data.json it cannot parse, and still finds the others', async () => {
    const root = tmpDir('kubelet-');
    volume(root, UID, 'broken', '{not json');
    volume(root, UID, 'podinfo', { driverName: DRIVER, volumeHandle: 'ok' });
    const { log, lines } = memoryLogger();
    const found = await findPublished(root, DRIVER, log);
    expect(found.map((f) => f.volume)).toEqual(['podinfo']);
    expect(lines).toEqual([expect.objectContaining({ volume: 'broken', msg: "cannot read the kubelet's volume data; skipping" })]);
  });
});
