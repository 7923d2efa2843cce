// The writer's step 3a decision on its own: which files with a KeepRule stay, given what is in place.
import { describe, expect, it } from 'vitest';
import { keptGroups, type InPlace } from '../../../../agent/files/volume/keeprules.ts';
import type { KeepRule, ProjectedFile } from '../../../../projections/index.ts';

const rule = (group: string, prefix: string, matches?: KeepRule['matches']): KeepRule => ({ group, prefixes: [Buffer.from(prefix)], ...(matches ? { matches } : {}) });
const f = (path: string, keep?: KeepRule): ProjectedFile => ({ path, bytes: Buffer.from('new'), mode: 0o644, ...(keep ? { keep } : {}) });
const upper = (b: Buffer) => Buffer.from(b.toString().toUpperCase());
const files = [f('plain'), f('c', rule('g', 'chain')), f('w', rule('g', 'CHAIN', { of: 'c', derive: upper })), f('x', rule('h', 'x'))];

describe('keptGroups', () => {
  it.each<{ what: string; disk: Record<string, string>; kept: string[] }>([
    { what: 'every file agrees', disk: { c: 'chain-a', w: 'CHAIN-A', x: 'x1' }, kept: ['c', 'w', 'x'] },
    { what: 'one file of a group has another prefix', disk: { c: 'other', w: 'OTHER', x: 'x1' }, kept: ['x'] },
    { what: 'one file of a group is missing', disk: { c: 'chain-a', x: 'x1' }, kept: ['x'] },
    { what: 'the derived file is not what its source derives', disk: { c: 'chain-a', w: 'CHAIN-B', x: 'x1' }, kept: ['x'] },
    { what: 'another group disagrees: only that group goes', disk: { c: 'chain-a', w: 'CHAIN-A', x: 'y' }, kept: ['c', 'w'] },
    { what: 'nothing is in place', disk: {}, kept: [] },
  ])('$what: keeps $kept', async ({ disk, kept }) => {
    const onDisk = disk;
    const read = async (x: ProjectedFile): Promise<InPlace | undefined> =>
      (onDisk[x.path] === undefined ? undefined : { bytes: Buffer.from(onDisk[x.path]!), stamp: `s-${x.path}` });
    const out = await keptGroups(files, read);
    expect([...out.keys()].sort()).toEqual(kept);
    for (const [p, v] of out) expect(v).toEqual({ bytes: Buffer.from(onDisk[p]!), stamp: `s-${p}` });
  });

  it('never reads a file without a rule, and derives once per source however many files share it', async () => {
    let derives = 0;
    const count = (b: Buffer) => { derives++; return upper(b); };
    const many = [f('plain'), f('c', rule('g', 'chain')), ...['w1', 'w2', 'w3'].map((p) => f(p, rule('g', 'C', { of: 'c', derive: count })))];
    const reads: string[] = [];
    const out = await keptGroups(many, async (x) => { reads.push(x.path); return { bytes: Buffer.from(x.path === 'c' ? 'chain' : 'CHAIN'), stamp: '' }; });
    expect(reads).not.toContain('plain');
    expect(out.size).toBe(4);
    expect(derives).toBe(1);
  });
});
