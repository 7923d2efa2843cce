import { describe, expect, it } from 'vitest';
import { readLines } from '../../../agent/kube/watchlines.ts';

async function* chunks(...parts: (string | Buffer)[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield typeof p === 'string' ? Buffer.from(p) : p;
}

async function lines(max: number, ...parts: (string | Buffer)[]): Promise<string[]> {
  const out: string[] = [];
  await readLines(chunks(...parts), max, () => {}, (l) => out.push(l));
  return out;
}

describe('readLines', () => {
  const euro = Buffer.from('"€"\n');
  it.each<[string, (string | Buffer)[], string[]]>([
    ['one line per newline, blank lines skipped', ['a\n\nb\n', '  \nc\n'], ['a', 'b', 'c']],
    ['a line split across chunks', ['{"ty', 'pe":1', '}\n'], ['{"type":1}']],
    ['several lines in one chunk, the rest held for the next', ['a\nb\nc', 'd\n'], ['a', 'b', 'cd']],
    ['a character split between chunks, decoded whole', [euro.subarray(0, 2), euro.subarray(2)], ['"€"']],
    ['an unterminated last line, dropped (the resumed watch sends it again)', ['a\nb'], ['a']],
  ])('%s', async (_what, parts, want) => {
    expect(await lines(1_000, ...parts)).toEqual(want);
  });

  it('fails on a line longer than the bound, without waiting for its end', async () => {
    await expect(lines(10, 'ok\n', '0123456789', 'x')).rejects.toThrow('a watch event is longer than 10 characters');
  });

  it('calls onBytes per chunk (the stall watchdog is re-armed by any byte)', async () => {
    let n = 0;
    await readLines(chunks('a', 'b', 'c\n'), 100, () => n++, () => {});
    expect(n).toBe(3);
  });
});
