// docs/contributing/architecture.md's table of what may import what, held to the code: every
// relative import of the product and the harness, as TypeScript's scanner reads it (static,
// re-exports, dynamic import()), must be one the table allows, and every file must have a row.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder, importsUnder, LayeringError, parseRules, unitOf, violations, type Import, type Rule } from '../support/layering.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const PAGE = 'docs/contributing/architecture.md';
const DIRS = ['agent', 'projections', 'localcluster', 'bench', 'scripts', 'test'];
const rules = parseRules(readFileSync(path.join(ROOT, PAGE), 'utf8'));

describe(`the code keeps ${PAGE}'s layering`, () => {
  it('every file of code has a row', () => {
    expect(filesUnder(ROOT, DIRS).filter((f) => unitOf(rules, f) === undefined)).toEqual([]);
  });

  it('every import is one the table allows', () => {
    expect(violations(rules, importsUnder(ROOT, DIRS))).toEqual([]);
  });

  it('every row names a folder or file that exists, and what it may import too', () => {
    const files = filesUnder(ROOT, DIRS);
    const exists = (u: string) => files.some((f) => (u.endsWith('/') ? f.startsWith(u) : f === u));
    const named = rules.flatMap((r) => [r.unit, ...r.mayImport.map((e) => e.replace(/\*\*$/, ''))]);
    expect(named.filter((u) => !exists(u))).toEqual([]);
  });

  it('the scanner sees the imports the table is about (static, dynamic and re-exports)', () => {
    const seen = importsUnder(ROOT, ['agent']);
    expect(seen).toContainEqual(expect.objectContaining({ from: 'agent/main.ts', to: 'agent/agent.ts' }));
    expect(seen).toContainEqual(expect.objectContaining({ from: 'agent/main.ts', to: 'agent/cli/render.ts' })); // import()
  });
});

describe('how the layering check reads a table and judges an import', () => {
  const table = (rows: string) => `# Page\n\n## What may import what\n\n| Folder or file | May import |\n|---|---|\n${rows}\n## Next\n| \`ignored/\` | |\n`;
  const sample: Rule[] = parseRules(table([
    '| `low/` | nothing of ours |',
    '| `mid/` | `low/`: and a reason, never `top/` |',
    '| `mid/one.ts` | `top/` |',
    '| `top/` | `mid/**`, `low/` |',
  ].join('\n')));
  const imp = (from: string, to: string): Import => ({ from, line: 3, to });

  it('reads the rows of its section only, with a row\'s units in code spans', () => {
    expect(sample).toEqual([
      { unit: 'low/', mayImport: [] },
      { unit: 'mid/', mayImport: ['low/'] },
      { unit: 'mid/one.ts', mayImport: ['top/'] },
      { unit: 'top/', mayImport: ['mid/**', 'low/'] },
    ]);
  });

  it.each([
    ['an import down the layers', imp('mid/a.ts', 'low/b.ts'), []],
    ['an import back up, named with the rule it breaks', imp('low/b.ts', 'mid/a.ts'), ['low/b.ts:3 imports mid/a.ts: low/ may import nothing of ours']],
    ['a file beside the importer', imp('mid/sub/a.ts', 'mid/sub/b.ts'), []],
    ['a file with a row of its own, judged by its row', imp('mid/one.ts', 'low/b.ts'), ['mid/one.ts:3 imports low/b.ts: mid/one.ts may import top/']],
    ['a tree by **', imp('top/a.ts', 'mid/deep/c.ts'), []],
    ['a unit not named, though it is below', imp('mid/a.ts', 'top/x.ts'), ['mid/a.ts:3 imports top/x.ts: mid/ may import low/']],
    ['a file no row covers', imp('other/a.ts', 'low/b.ts'), ['other/a.ts: no row of the table covers this file']],
  ])('%s', (_what, i, expected) => {
    expect(violations(sample, [i])).toEqual(expected);
  });

  it('a page without the section is an error, not an empty table', () => {
    expect(() => parseRules('# Page\n')).toThrow(LayeringError);
  });
});
