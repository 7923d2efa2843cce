import { describe, expect, it } from 'vitest';
import { describe as quote, isDns1123Label, isDns1123Subdomain, isValidPodUID } from '../../../agent/common/validation.ts';

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
