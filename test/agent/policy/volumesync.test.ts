// Step 1a of a volume sync: which files the last sync left as they should be now.

import { describe, expect, it } from 'vitest';
import { keptStamps } from '../../../agent/policy/volumesync.ts';
import type { ProjectedFile } from '../../../projections/index.ts';

const f = (path: string, text: string, mode = 0o644): ProjectedFile => ({ path, bytes: Buffer.from(text), mode });
const now = [f('a', 'one'), f('b', 'two'), f('x/c', 'three')];

type Row = { what: string; left: ProjectedFile[] | undefined; stamps: Record<string, string> | undefined; kept: Record<string, string> };

describe('keptStamps', () => {
  it.each<Row>([
    { what: 'no earlier sync', left: undefined, stamps: undefined, kept: {} },
    { what: 'no stamps from it (it failed)', left: now, stamps: undefined, kept: {} },
    { what: 'every file as left', left: now, stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { a: 's1', b: 's2', 'x/c': 's3' } },
    { what: 'one file with other bytes', left: [f('a', 'one'), f('b', 'TWO'), f('x/c', 'three')], stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { a: 's1', 'x/c': 's3' } },
    { what: 'same bytes, shorter', left: [f('a', 'on'), f('b', 'two'), f('x/c', 'three')], stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { b: 's2', 'x/c': 's3' } },
    { what: 'one file with another mode', left: [f('a', 'one', 0o600), f('b', 'two'), f('x/c', 'three')], stamps: { a: 's1', b: 's2', 'x/c': 's3' }, kept: { b: 's2', 'x/c': 's3' } },
    { what: 'a file without a stamp', left: now, stamps: { a: 's1', 'x/c': 's3' }, kept: { a: 's1', 'x/c': 's3' } },
    { what: 'a file new to the set', left: [f('a', 'one')], stamps: { a: 's1', b: 's2' }, kept: { a: 's1' } },
    { what: 'the same bytes under another name', left: [f('c', 'three')], stamps: { c: 's3' }, kept: {} },
  ])('$what', ({ left, stamps, kept }) => {
    expect(keptStamps(now, left, stamps)).toEqual(kept);
  });
});
