// Step 1a of a volume sync: which files the last sync left as they should be now.

import { describe, expect, it } from 'vitest';
import { realClock } from '../../../agent/common/clock.ts';
import { AgentMetrics } from '../../../agent/monitoring/metrics.ts';
import { PodTable } from '../../../agent/files/podtable.ts';
import { keptStamps, VolumeSync } from '../../../agent/files/volumesync.ts';
import { DirLocks } from '../../../agent/files/volume/dirlocks.ts';
import type { VolumeWriter } from '../../../agent/files/volume/writer.ts';
import type { ProjectedFile } from '../../../projections/index.ts';

const f = (path: string, text: string, mode = 0o644): ProjectedFile => ({ path, bytes: Buffer.from(text), mode });
const now = [f('a', 'one'), f('b', 'two'), f('x/c', 'three')];

type Row = { what: string; left: ProjectedFile[] | undefined; stamps: Record<string, string> | undefined; kept: Record<string, string> };

describe('keptStamps', () => {
  it.each<Row>([
    { what: 'no earlier sync', left: undefined, stamps: undefined, kept: {} },
    { what: 'no stamps from it (it failed)', left: now, stamps: undefined, kept: {} },
    { what: 'every file as left, but the one in a subdirectory (no directory event would tell)', left: now, stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { a: 's1', b: 's2' } },
    { what: 'one file with other bytes', left: [f('a', 'one'), f('b', 'TWO'), f('x/c', 'three')], stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { a: 's1' } },
    { what: 'same bytes, shorter', left: [f('a', 'on'), f('b', 'two'), f('x/c', 'three')], stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { b: 's2' } },
    { what: 'one file with another mode', left: [f('a', 'one', 0o600), f('b', 'two'), f('x/c', 'three')], stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { b: 's2' } },
    { what: 'a file without a stamp', left: now, stamps: { a: 's1', 'x/c': 's3' }, kept: { a: 's1' } },
    { what: 'a file new to the set', left: [f('a', 'one')], stamps: { a: 's1', b: 's2' }, kept: { a: 's1' } },
    { what: 'the same bytes under another name', left: [f('c', 'three')], stamps: { c: 's3' }, kept: {} },
  ])('$what', ({ left, stamps, kept }) => {
    expect(keptStamps(now, left, stamps)).toEqual(kept);
  });
});

describe('VolumeSync', () => {
  it('decides what to leave out under the directory lock, after a sync of the same directory ahead of it', async () => {
    const metrics = new AgentMetrics({ processMetrics: false });
    const table = new PodTable({ dirs: { watch() {}, unwatch() {}, close: async () => {} }, metrics });
    const asked: string[][] = [];
    let entered = () => {};
    let release = () => {};
    const writer: VolumeWriter = {
      async sync(_t, files) {
        asked.push(files.map((x) => `${x.path}=${x.bytes.toString()}`));
        if (asked.length === 2) { // the second sync (say, a CSI publish) holds the lock a while
          entered();
          await new Promise<void>((r) => (release = r));
        }
        return { written: files.map((x) => x.path), unchanged: [], removed: [], kept: {}, stamps: Object.fromEntries(files.map((x) => [x.path, `s${asked.length}`])) };
      },
      clear: async () => ({ removed: [] }),
      stampOf: async () => undefined,
    };
    const sync = new VolumeSync({ table, writer, locks: new DirLocks(), metrics, clock: realClock });
    const t = table.track('u', { kind: 'Pod', name: 'p', namespace: 'ns', uid: 'u' }, 'u');
    const v = { name: 'podinfo', target: { root: '/k', components: ['pods', 'u', 'volumes', 'kubernetes.io~empty-dir', 'podinfo'] } };
    const files = (node: string, owners: string) => [f('node', node), f('ownerReferences', owners)];
    table.setFiles(t, files('n0', 'o0'), [], 0);
    await sync.run('u', t, v, { verify: false, remove: [] });
    table.setFiles(t, files('n1', 'o0'), [], 0);
    const ahead = sync.run('u', t, v, { verify: false, remove: [] });
    await new Promise<void>((r) => (entered = r));
    table.setFiles(t, files('n0', 'o1'), [], 0);
    const behind = sync.run('u', t, v, { verify: false, remove: [] }); // node is n0 again, but n1 is on disk by the time it runs
    release();
    await ahead;
    await behind;
    expect(asked).toEqual([['node=n0', 'ownerReferences=o0'], ['node=n1'], ['node=n0', 'ownerReferences=o1']]);
  });
});
