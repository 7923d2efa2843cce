import { describe, expect, it } from 'vitest';
import { Slices } from '../../../agent/files/slices.ts';

/** Slices whose turns the test hands out one at a time. */
function manual(size: number) {
  const applied: string[] = [];
  const waiting: (() => void)[] = [];
  const failed: string[] = [];
  const s = new Slices<string>({
    size, turn: () => new Promise((r) => waiting.push(r)),
    apply: (x) => {
      if (x.startsWith('bad')) throw new Error(`cannot apply ${x}`);
      applied.push(x);
    },
    failed: (x, err) => failed.push(`${x}: ${(err as Error).message}`),
  });
  const turn = async () => {
    waiting.shift()!();
    await new Promise((r) => setImmediate(r)); // let the loop apply its slice
  };
  return { s, applied, failed, turn, waiting };
}
const items = (...keys: string[]) => new Map(keys.map((k) => [k, k]));

describe('Slices', () => {
  it('applies the first slice at once and one more slice per turn, in order', async () => {
    const { s, applied, turn } = manual(2);
    s.start(items('a', 'b', 'c', 'd', 'e'));
    expect(applied).toEqual(['a', 'b']);
    await turn();
    expect(applied).toEqual(['a', 'b', 'c', 'd']);
    await turn();
    expect(applied).toEqual(['a', 'b', 'c', 'd', 'e']);
    await s.done();
    expect(s.pending).toBe(0);
  });

  it('never applies an item superseded before its slice', async () => {
    const { s, applied, turn } = manual(2);
    s.start(items('a', 'b', 'c', 'd'));
    s.supersede('d');
    s.supersede('a'); // already applied: nothing to drop
    await turn();
    await s.done();
    expect(applied).toEqual(['a', 'b', 'c']);
  });

  it('a new start replaces what is pending: the old items left are dropped, the new ones applied', async () => {
    const { s, applied, turn, waiting } = manual(2);
    s.start(items('a', 'b', 'c', 'd'));
    s.start(items('x', 'y', 'z'));
    expect(applied).toEqual(['a', 'b', 'x', 'y']);
    expect(waiting).toHaveLength(1); // one loop, not two
    await turn();
    await s.done();
    expect(applied).toEqual(['a', 'b', 'x', 'y', 'z']);
  });

  it('reports an item whose apply throws and still applies the rest, in the first slice and later ones', async () => {
    const { s, applied, failed, turn } = manual(2);
    s.start(items('bad-1', 'a', 'b', 'bad-2', 'c'));
    await turn();
    await turn();
    await s.done();
    expect(applied).toEqual(['a', 'b', 'c']);
    expect(failed).toEqual(['bad-1: cannot apply bad-1', 'bad-2: cannot apply bad-2']);
  });

  it('take hands a pending item to the caller, which is then not applied by a slice', async () => {
    const { s, applied, turn } = manual(1);
    s.start(items('a', 'b', 'c'));
    expect(s.take('c')).toBe('c');
    expect(s.take('a')).toBeUndefined(); // applied already
    await turn();
    await s.done();
    expect(applied).toEqual(['a', 'b']);
  });

  it('done resolves once everything is applied, or at once after cancel', async () => {
    const s = new Slices<string>({ size: 1, apply: () => {}, failed: () => {} });
    s.start(items('a', 'b', 'c'));
    expect(s.pending).toBe(2);
    await s.done(); // real turns
    expect(s.pending).toBe(0);
    const { s: t, applied, turn } = manual(1);
    t.start(items('a', 'b', 'c'));
    t.cancel();
    await turn();
    await t.done();
    expect(applied).toEqual(['a']);
  });
});
