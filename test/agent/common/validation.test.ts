import { describe, expect, it } from 'vitest';
import { describe as quote, displayName, isDns1123Label, isDns1123Subdomain, isValidPodUID, oneLine } from '../../../agent/common/validation.ts';

describe('grammars', () => {
  it.each([
    ['podinfo', true, true], ['a', true, true], ['a-b-1', true, true], ['x'.repeat(63), true, true], ['x'.repeat(64), false, true],
    ['a.b', false, true], ['x'.repeat(253), false, true], ['x'.repeat(254), false, false],
    ['', false, false], ['-a', false, false], ['a-', false, false], ['A', false, false], ['a_b', false, false], ['..', false, false], ['a/b', false, false],
  ])('%j: label %s, subdomain %s', (s, label, subdomain) => {
    expect(isDns1123Label(s)).toBe(label);
    expect(isDns1123Subdomain(s)).toBe(subdomain);
  });

  it.each([
    ['6be1683f-da9c-4f68-9440-82376231cfa6', true], ['3f2ab0c9d1e8a7b6', true], ['static_pod-hash', true], ['x'.repeat(128), true],
    ['', false], ['.hidden', false], ['..', false], ['a/b', false], ['-lead', false], ['x'.repeat(129), false], ['a\0b', false], ['uid ', false],
  ])('pod UID %j: %s', (uid, ok) => {
    expect(isValidPodUID(uid)).toBe(ok);
  });
});

describe('describe()', () => {
  it('quotes as JSON, so controls and quotes cannot break a log line or an Event', () => {
    expect(quote('a"b\nc')).toBe('"a\\"b\\nc"');
  });

  it('bounds long pod-controlled text and says how long it was', () => {
    expect(quote('x'.repeat(1000))).toBe(`"${'x'.repeat(80)}…(1000 chars)"`);
  });

  it.each([
    ['a Cyrillic look-alike', 'p\u043edinfo', '"p\\u043edinfo"'],
    ['a zero-width space', 'pod\u200binfo', '"pod\\u200binfo"'],
    ['an emoji (two UTF-16 units)', 'pod🎉', '"pod\\ud83c\\udf89"'],
    ['a raw control byte', 'a\u001bb', '"a\\u001bb"'],
  ])('makes %s visible', (_what, input, shown) => {
    expect(quote(input)).toBe(shown);
  });
});

describe('oneLine()', () => {
  it.each([
    { what: 'a newline', s: 'a\nb', want: 'a b' },
    { what: 'an ANSI escape (C0)', s: 'a\x1b[2Jb', want: 'a\\u001b[2Jb' },
    { what: 'the one-byte CSI (C1), which JSON.stringify keeps', s: 'a\u009b31m', want: 'a\\u009b31m' },
    { what: 'DEL and NUL', s: '\u007f\u0000', want: '\\u007f\\u0000' },
    { what: 'line and paragraph separators', s: 'a\u2028b\u2029', want: 'a\\u2028b\\u2029' },
    { what: 'a right-to-left override (it reorders what a terminal shows)', s: 'x\u202egnp.exe', want: 'x\\u202egnp.exe' },
    { what: 'ordinary non-ASCII text, kept', s: 'größe … 名前', want: 'größe … 名前' },
  ])('escapes $what', ({ s, want }) => {
    expect(oneLine(s)).toBe(want);
  });
});

describe('displayName()', () => {
  it.each([
    { v: 'web-0', want: 'web-0' },
    { v: 'p\n\x1b[31m', want: '"p\\n\\u001b[31m"' },
    { v: '', want: '""' },
    { v: 'x'.repeat(254), want: `"${'x'.repeat(80)}…(254 chars)"` },
    { v: { a: 1 }, want: '(an object, not a name)' },
    { v: ['a', 'b'], want: '(a list, not a name)' },
    { v: 7, want: '(a number, not a name)' },
  ])('shows $v as $want', ({ v, want }) => {
    expect(displayName(v)).toBe(want);
  });
});
