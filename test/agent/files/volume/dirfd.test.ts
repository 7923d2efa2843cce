// dirfd.ts's path helper: joinUnder is path.join, only cheaper for single safe names.
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { joinUnder } from '../../../../agent/files/volume/dirfd.ts';

describe('joinUnder', () => {
  it.each<[string, string[]]>([
    ['/var/lib/kubelet', ['pods', 'u', 'volumes', 'kubernetes.io~empty-dir', 'podinfo']],
    ['/var/lib/kubelet/', ['pods']],
    ['/', ['pods', 'x']],
    ['//a//b/./c/../', ['d']],
    ['/a/.', ['d']],
    ['/a/..', ['d']],
    ['/a/../', ['d']],
    ['/a/.b/..c/d.', ['e']],
    ['/a/b/', ['e']],
    ['relative/root', ['a']],
    ['/r', []],
    ['/r', ['..', 'x']], // not a safe name: path.join's own answer
    ['/r', ['a/b']],
    ['/r', ['.', 'x']],
    ['/r', ['']],
  ])('%s + %j is what path.join says', (root, names) => {
    expect(joinUnder(root, names)).toBe(path.join(root, ...names));
  });

  it('is path.join for any root and names', () => {
    const seg = fc.oneof(fc.constantFrom('', '.', '..', '/', '//', 'a', 'b.c', '~x'), fc.string({ maxLength: 6 }));
    const root = fc.array(seg, { maxLength: 5 }).map((s) => s.join('/'));
    fc.assert(fc.property(fc.boolean(), root, fc.array(seg, { maxLength: 5 }), (abs, r, names) => {
      const base = (abs ? '/' : '') + r;
      expect(joinUnder(base, names)).toBe(path.join(base, ...names));
    }), { numRuns: 2000 });
  });
});
