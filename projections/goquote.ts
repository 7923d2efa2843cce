// Go's strconv.Quote, which the kubelet uses for each value of the labels and
// annotations files (`key="value"` lines). Printable code points (Go's unicode.IsPrint:
// letters, marks, numbers, punctuation, symbols and the ASCII space) stay as they are;
// \a \b \f \n \r \t \v \\ \" use the short forms; other ASCII controls \xXX; other code
// points below U+10000 \uXXXX, the rest \UXXXXXXXX. (The API server only serves valid UTF-8;
// a lone surrogate, which only a test can make, is taken as U+FFFD, as Go decodes it.)
//
// Go 1.26 knows Unicode 15.0; Node 24 knows 17.0. Code points assigned since are printable
// to Node but not to Go, which escapes them: NEWER_THAN_GO lists them, and a test checks
// the whole code space against Go's strconv.IsPrint.

const SHORT: Record<number, string> = {
  0x07: '\\a', 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t', 0x0b: '\\v',
  0x5c: '\\\\', 0x22: '\\"',
};
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;

/** Code points printable in Unicode 17.0 but unassigned in 15.0 (inclusive ranges, ascending). */
const NEWER_THAN_GO: readonly (readonly [number, number])[] = [
  [0x88f, 0x88f], [0x897, 0x897], [0xc5c, 0xc5c], [0xcdc, 0xcdc], [0x1acf, 0x1add], [0x1ae0, 0x1aeb],
  [0x1b4e, 0x1b4f], [0x1b7f, 0x1b7f], [0x1c89, 0x1c8a], [0x20c1, 0x20c1], [0x2427, 0x2429], [0x2b96, 0x2b96],
  [0x2ffc, 0x2fff], [0x31e4, 0x31e5], [0x31ef, 0x31ef], [0xa7cb, 0xa7cf], [0xa7d2, 0xa7d2], [0xa7d4, 0xa7d4],
  [0xa7da, 0xa7dc], [0xa7f1, 0xa7f1], [0xfbc3, 0xfbd2], [0xfd90, 0xfd91], [0xfdc8, 0xfdce],
  [0x105c0, 0x105f3], [0x10940, 0x10959], [0x10d40, 0x10d65], [0x10d69, 0x10d85], [0x10d8e, 0x10d8f],
  [0x10ec2, 0x10ec7], [0x10ed0, 0x10ed8], [0x10efa, 0x10efc], [0x11380, 0x11389], [0x1138b, 0x1138b],
  [0x1138e, 0x1138e], [0x11390, 0x113b5], [0x113b7, 0x113c0], [0x113c2, 0x113c2], [0x113c5, 0x113c5],
  [0x113c7, 0x113ca], [0x113cc, 0x113d5], [0x113d7, 0x113d8], [0x113e1, 0x113e2], [0x116d0, 0x116e3],
  [0x11b60, 0x11b67], [0x11bc0, 0x11be1], [0x11bf0, 0x11bf9], [0x11db0, 0x11ddb], [0x11de0, 0x11de9],
  [0x11f5a, 0x11f5a], [0x13460, 0x143fa], [0x16100, 0x16139], [0x16d40, 0x16d79], [0x16ea0, 0x16eb8],
  [0x16ebb, 0x16ed3], [0x16ff2, 0x16ff6], [0x187f8, 0x187ff], [0x18cff, 0x18cff], [0x18d09, 0x18d1e],
  [0x18d80, 0x18df2], [0x1cc00, 0x1ccfc], [0x1cd00, 0x1ceb3], [0x1ceba, 0x1ced0], [0x1cee0, 0x1cef0],
  [0x1e5d0, 0x1e5fa], [0x1e5ff, 0x1e5ff], [0x1e6c0, 0x1e6de], [0x1e6e0, 0x1e6f5], [0x1e6fe, 0x1e6ff],
  [0x1f6d8, 0x1f6d8], [0x1f777, 0x1f77a], [0x1f8b2, 0x1f8bb], [0x1f8c0, 0x1f8c1], [0x1f8d0, 0x1f8d8],
  [0x1fa54, 0x1fa57], [0x1fa89, 0x1fa8a], [0x1fa8e, 0x1fa8f], [0x1fabe, 0x1fabe], [0x1fac6, 0x1fac6],
  [0x1fac8, 0x1fac8], [0x1facd, 0x1facd], [0x1fadc, 0x1fadc], [0x1fadf, 0x1fadf], [0x1fae9, 0x1faea],
  [0x1faef, 0x1faef], [0x1fbcb, 0x1fbef], [0x1fbfa, 0x1fbfa], [0x2b73a, 0x2b73f], [0x2cea2, 0x2cead],
  [0x2ebf0, 0x2ee5d], [0x323b0, 0x33479],
];

function newerThanGo(cp: number): boolean {
  let lo = 0;
  let hi = NEWER_THAN_GO.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = NEWER_THAN_GO[mid]!;
    if (cp < a) hi = mid - 1;
    else if (cp > b) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Go's strconv.IsPrint for a code point above ASCII. */
export function goIsPrint(cp: number): boolean {
  return PRINTABLE.test(String.fromCodePoint(cp)) && !newerThanGo(cp);
}

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

/** strconv.Quote(s), quotes included. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    let cp = ch.codePointAt(0)!;
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd; // lone surrogate: Go decodes its UTF-8 as RuneError
    const short = SHORT[cp];
    if (short !== undefined) out += short;
    else if (cp === 0x20 || (cp > 0x20 && cp < 0x7f)) out += String.fromCodePoint(cp);
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (goIsPrint(cp)) out += String.fromCodePoint(cp);
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return out + '"';
}

/** fieldpath.FormatMap: `key="value"` lines sorted by key (bytewise, as Go sorts strings), no final newline. */
export function formatMap(m: Readonly<Record<string, string>> | null | undefined): string {
  const keys = Object.keys(m ?? {}).sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  return keys.map((k) => `${k}=${goQuote(m![k]!)}`).join('\n');
}
