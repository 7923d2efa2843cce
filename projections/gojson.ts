// Go encoding/json byte compatibility for the few shapes we emit.
//
// The KEP's file is what a kubelet (Go) would write, so our bytes must match
// json.Marshal exactly, not JSON.stringify: Go escapes <, >, & and U+2028/U+2029,
// uses \b \f \n \r \t short forms, lower-case \u00XX for other controls, and
// replaces invalid UTF-8 (for us: lone UTF-16 surrogates) with U+FFFD.

const HEX = '0123456789abcdef';

const SHORT: Record<number, string> = {
  0x22: '\\"',
  0x5c: '\\\\',
  0x08: '\\b',
  0x0c: '\\f',
  0x0a: '\\n',
  0x0d: '\\r',
  0x09: '\\t',
};

function needsEscape(c: number): boolean {
  return c < 0x20 || c === 0x22 || c === 0x5c || c === 0x3c || c === 0x3e || c === 0x26 ||
    c === 0x2028 || c === 0x2029 || (c >= 0xd800 && c <= 0xdfff);
}

/**
 * Any UTF-16 unit the loop below would escape (a surrogate of a valid pair too: the loop
 * lets those through). Names, UIDs and kinds almost never have one, and one native
 * regexp scan is cheaper than the loop in the agent's interpreter-only V8.
 */
const MAY_ESCAPE = /[\u0000-\u001f"\\<>&\u2028\u2029\ud800-\udfff]/;

/** A Go-marshalled JSON string literal, quotes included. */
export function goString(s: string): string {
  if (!MAY_ESCAPE.test(s)) return '"' + s + '"';
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!needsEscape(c)) continue;
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++; // a valid surrogate pair is one ordinary non-ASCII code point
        continue;
      }
    }
    out += s.slice(start, i);
    start = i + 1;
    const short = SHORT[c];
    if (short !== undefined) out += short;
    else if (c >= 0xd800 && c <= 0xdfff) out += '\ufffd';
    else if (c === 0x2028 || c === 0x2029) out += c === 0x2028 ? '\\u2028' : '\\u2029';
    else out += '\\u00' + HEX[c >> 4] + HEX[c & 0xf];
  }
  return out + s.slice(start) + '"';
}

/** One `"key":value` member; the value is already encoded. */
export type Member = readonly [key: string, encoded: string];

/** Member names already encoded: goObject is given our struct field names, a few constants (bounded all the same). */
const encodedKeys = new Map<string, string>();
const MAX_ENCODED_KEYS = 128;

function encodedKey(k: string): string {
  let e = encodedKeys.get(k);
  if (e === undefined) {
    e = goString(k);
    if (encodedKeys.size < MAX_ENCODED_KEYS) encodedKeys.set(k, e);
  }
  return e;
}

/**
 * A compact object with members in the given order, as Go emits struct fields. An indexed
 * loop, not map/join over destructured pairs: the agent's V8 runs without its optimising
 * compilers, where each destructuring allocates an iterator and a result per element.
 */
export function goObject(members: readonly Member[]): string {
  let out = '{';
  for (let i = 0; i < members.length; i++) {
    const m = members[i]!;
    out += (i === 0 ? '' : ',') + encodedKey(m[0]) + ':' + m[1];
  }
  return out + '}';
}

/** A compact array; Go writes an empty (non-nil) slice as []. */
export function goArray(encoded: readonly string[]): string {
  return '[' + encoded.join(',') + ']';
}
