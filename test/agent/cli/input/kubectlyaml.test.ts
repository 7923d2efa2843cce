// render and inject read YAML as kubectl does, and inject writes YAML kubectl reads back as
// meant: both held to Go's sigs.k8s.io/yaml (the oracle in test/projections/gooracle).

import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { readYamlDocuments, writeYaml } from '../../../../agent/cli/input/kubectlyaml.ts';
import { buildOracle, goYamlToJson } from '../../../support/gooracle.ts';

beforeAll(() => buildOracle(), 120_000);

/** Unquoted scalars on which YAML 1.1, YAML 1.2 and go-yaml disagree somewhere. */
const PLAIN = [
  'yes', 'Yes', 'YES', 'y', 'Y', 'n', 'N', 'no', 'on', 'On', 'off', 'OFF', 'true', 'False', 'TRUE', 'yEs', 'oN',
  '~', 'null', 'Null', 'NULL', 'nil', '.nan', '.NaN', '.inf', '-.Inf', '+.INF', 'inf', 'NaN',
  '12:30', '1:20.5', '-1:30', '190:20:30', '2024-01-01', '2024-01-01T10:00:00Z', '2024-1-2',
  '0', '-0', '+1', '0644', '09', '0o17', '0O17', '0x1F', '0X1f', '0b101', '-0b101', '0B11', '1_000', '0x_1F', '_1',
  '1e3', '1E+3', '-1.5e-3', '.5', '1.', '+.5', '.', '..', '1.2.3', '0x1p-2', '1e', 'e3',
  '9007199254740993', '18446744073709551615', '18446744073709551616', '-9223372036854775809',
  'abc', '<<', '=', 'a.b',
];

/**
 * Each side's reading of `yaml`, one object per document, compared as the JSON the API server
 * would get (NaN and big numbers as Go writes them). Both go through JSON.stringify, which writes
 * a float's -0 as 0, as the API server reads it either way: Go keeps the sign, ours would not.
 */
const asJson = (docs: unknown[]) => JSON.parse(JSON.stringify(docs)) as unknown[];
const go = (yaml: string) => asJson(goYamlToJson(yaml));
const ours = (yaml: string) => asJson(readYamlDocuments(yaml));

describe('reading YAML as kubectl does', () => {
  it('resolves unquoted values and keys as go-yaml does, quoted ones as strings', () => {
    const values = PLAIN.filter((s) => !['.nan', '.NaN', '.inf', '-.Inf', '+.INF'].includes(s)); // JSON has no NaN or Infinity: Go refuses them
    const yaml = values.map((s, i) => `v${i}: ${s}\nq${i}: "${s}"\n`).join('') + values.filter((s) => s !== '<<' && !/^-?[0-9]{19,}$/.test(s) && !['~', 'null', 'Null', 'NULL'].includes(s)).map((s) => `${s}: key\n`).join(''); // not a merge key, nor a key Go refuses (null, past int64)
    const [mine] = ours(yaml) as [Record<string, unknown>];
    const [theirs] = go(yaml) as [Record<string, unknown>];
    for (const [i, s] of values.entries()) {
      expect.soft([s, mine[`v${i}`]]).toEqual([s, theirs[`v${i}`]]);
      expect.soft(mine[`q${i}`]).toBe(s);
    }
    expect(Object.keys(mine).filter((k) => !/^[vq]\d+$/.test(k)).sort()).toEqual(Object.keys(theirs).filter((k) => !/^[vq]\d+$/.test(k)).sort());
  });

  it.each([
    ['anchors, and a merge key before the keys it yields to', 'base: &b {a: 1, b: on}\nchild:\n  <<: *b\n  b: 2\n'],
    ['a merge key after a key it overwrites', 'data: {p: "0", <<: {p: "1"}}\n'],
    ['two merge keys: the later wins', 'm:\n  <<: {p: 1}\n  <<: {p: 2}\n'],
    ['a list of maps merged: the first wins, and overwrites what came before', 'm: {p: 0, <<: [{p: 1}, {p: 3, q: 2}]}\n'],
    ['a repeated key: the last wins', 'a: 1\na: 2\n'],
    ['explicit tags', 'a: !!int 3\nb: !!int "3"\nc: !!float 3\nd: !!bool yes\ne: !!null ""\nf: !!str 3\ng: !!binary aGk=\nh: !!timestamp 2024-01-01\ni: !custom x\nj: ! 3\n'],
    ['floats too large for Go: text', 'a: 1e400\nb: .1e400\nc: 1.8e308\nd: -1e999\n'],
    ['float keys, as Go spells them', '3.14159265358979: a\n1234567.0: b\n-0.0: c\n1e6: d\n0.1: e\n1e-5: f\n100000: g\n'],
    ['a document end marker: the rest of the part is not read', 'a: 1\n...\nb: 2\n'],
    ['block scalars, folded and kept', 'a: |\n  x\n   y\nb: >-\n  p\n  q\nc: |+\n  z\n\n'],
    ['JSON, numbers and all', '{"a": 1e3, "b": "yes", "c": [1, 2.5, null, true], "d": {"e": "0o17"}}'],
    ['several documents, one empty', 'a: 1\n---\n---\nb: on\n--- # comment\nc: 0x1F\n'],
    ['several JSON objects in a row (jq -c)', '{"kind":"A","n":1}\n{"kind":"B","s":"\\ud800"}\n'],
    ['a merge key tagged !!merge or !, and an alias of "<<" that is no merge key', 'x: &x <<\na: {p: 1, !!merge <<: {q: 2}, ! <<: {r: 3}}\nb: {*x : {c: 1}}\n'],
    ['a hundred and fifty merges of one anchor (go-yaml allows that much aliasing)', `d: &d {a: 1}\nitems:\n${Array.from({ length: 150 }, (_, i) => `- {<<: *d, i: ${i}}\n`).join('')}`],
    ['a float key past float32', '9E+62: k\n'],
    ['negative zero floats', 'a: -0.0\nb: -.0e3\nc: -0.\nd: -0\n'],
  ])('reads %s as kubectl does', (_what, yaml) => {
    expect(ours(yaml).filter((d) => d !== null)).toEqual(go(yaml));
  });

  it.each([
    ['a tag that does not fit the value', 'a: !!int x\n'],
    ['a character Go refuses (DEL)', 'a: x\x7fy\n'],
    ['a character Go reads as a line break (U+0085)', 'a: x\u0085y\n'],
    ['an infinity, which JSON cannot hold', 'a: .inf\n'],
    ['a null key', '~: a\n'],
    ['a separator line with more than a comment', '--- {a: 1}\n'],
    ['an alias of an anchor not defined before it', 'a: *b\nb: &b 1\n'],
    ['an alias of an anchor of an earlier document', 'a: &b 1\n---\nc: *b\n'],
    ['a merge of an alias of a list', 'l: &l [{a: 1}]\nm: {<<: *l}\n'],
    ['an anchor whose value holds its own alias', 'a: &a [*a]\n'],
    ['a billion laughs', `a: &a ["x","x","x","x","x","x","x","x","x"]\n${'bcdefghij'.split('').map((c, i) => `${c}: &${c} [${Array(9).fill(`*${'abcdefghij'[i]}`).join(',')}]`).join('\n')}\n`],
    ['a JSON number too large for a float64', '{"a": 1e400}'],
  ])('refuses %s, as kubectl does', (_what, yaml) => {
    expect(() => go(yaml)).toThrow();
    expect(() => readYamlDocuments(yaml)).toThrow();
  });

  it('resolves random plain scalars as go-yaml does', () => {
    fc.assert(fc.property(fc.array(fc.stringMatching(/^[0-9._+\-eExXoObBaAfFyYnNtT~]{1,8}$/), { minLength: 50, maxLength: 50 }), (values) => {
      const plain = values.filter((s) => !s.startsWith('-') || /^-[0-9.]/.test(s)); // "- x" and a lone "-" are sequences
      const yaml = plain.map((s, i) => `v${i}: ${s}\n`).join('');
      const [mine] = ours(yaml) as [Record<string, unknown>];
      const [theirs] = go(yaml) as [Record<string, unknown>];
      for (const [i, s] of plain.entries()) expect([s, mine[`v${i}`]]).toEqual([s, theirs[`v${i}`]]);
    }), { numRuns: 20 });
  });
});

describe('writing YAML that kubectl reads back as written', () => {
  it('quotes every string kubectl would read as a boolean, number or null, as a value and as a key', () => {
    const obj = { values: Object.fromEntries(PLAIN.map((s, i) => [`v${i}`, s])), keys: Object.fromEntries(PLAIN.map((s) => [s, 'k'])), n: 420, f: 1.5, t: true, z: null };
    expect(go(writeYaml(obj))).toEqual([obj]);
  });

  it('escapes what kubectl would refuse or read as a line break', () => {
    const obj = { nel: 'a\u0085b', ls: '\u2028', ps: 'x\u2029', del: 'a\x7fb', c1: '\x80\x9f', nonchar: '\ufffe', nbsp: '\u00a0', bom: '\ufeffa', tab: '\tt', long: `long text   \u2028 more`,
      make: '\techo hi\n', tabbed: '\n\tx', blank: ' \n', blanks: '\t\n', indented: 'a\n  b\n' };
    expect(go(writeYaml(obj))).toEqual([obj]);
    expect(go(writeYaml({ lone: '\ud800x' }))).toEqual([{ lone: '\ufffdx' }]); // as kubectl's JSON holds it
    for (let pad = 490; pad < 520; pad++) { // go-yaml fails on a raw U+FEFF near its buffer's 512-byte boundary
      const near = { p: 'x'.repeat(pad), v: '\ufeff', w: '' };
      expect(go(writeYaml(near))).toEqual([near]);
    }
  });

  it('round-trips random strings', () => {
    const numberLike = fc.oneof(fc.stringMatching(/^[-+]?0[oOxXbB][0-9a-fA-F_]{1,4}$/), fc.stringMatching(/^-?[0-9]{1,3}(:[0-5][0-9]){1,2}$/),
      fc.stringMatching(/^[-+]?[0-9.]{1,4}[eE][-+]?[0-9]{1,2}$/), fc.stringMatching(/^[-+]?[0-9_]{1,6}$/));
    const awkward = fc.string({ unit: fc.constantFrom('a', ' ', ':', '#', '"', "'", '\\', '\n', '\t', '-', '\u0085', '\u2028', '\u2029', '\x7f', '\x9b', '\ufffe', '\u00a0', '\ufeff', 'é', '😀'), maxLength: 8 });
    fc.assert(fc.property(fc.array(fc.oneof(numberLike, fc.stringMatching(/^[0-9._+\-:eExXoObBaAfFyYnNtT~ ]{0,8}$/), awkward, fc.string()), { minLength: 50, maxLength: 50 }), (values) => {
      const obj = Object.fromEntries(values.map((s, i) => [`v${i}`, s]));
      expect(go(writeYaml(obj))).toEqual([obj]);
    }), { numRuns: 20 });
  });
});

