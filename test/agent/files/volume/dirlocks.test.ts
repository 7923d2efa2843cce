import { describe, expect, it } from 'vitest';
import { DirLocks } from '../../../../agent/files/volume/dirlocks.ts';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('DirLocks', () => {
  it('runs operations on one directory one at a time, in order, even when one fails', async () => {
    const locks = new DirLocks();
    const log: string[] = [];
    const op = (name: string, fail = false) => locks.run('/d', async () => {
      log.push(`${name} start`);
      await tick();
      log.push(`${name} end`);
      if (fail) throw new Error(name);
      return name;
    });
    const results = await Promise.allSettled([op('a'), op('b', true), op('c')]);
    expect(log).toEqual(['a start', 'a end', 'b start', 'b end', 'c start', 'c end']);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  it('lets different directories proceed side by side', async () => {
    const locks = new DirLocks();
    const log: string[] = [];
    const op = (dir: string) => locks.run(dir, async () => { log.push(`${dir} start`); await tick(); log.push(`${dir} end`); });
    await Promise.all([op('/a'), op('/b')]);
    expect(log.slice(0, 2)).toEqual(['/a start', '/b start']);
  });
});
