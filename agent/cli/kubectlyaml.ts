// YAML as kubectl reads it, for `render` and `inject`: sigs.k8s.io/yaml, which decodes with
// go-yaml v2 into interface{} and then converts to JSON. An unquoted scalar there is not
// YAML 1.1's nor 1.2's: `yes`, `on` and `y` are booleans (1.1), `12:30` is a string (no
// base 60), `0o17` and `1e3` are numbers (Go's ParseInt and ParseFloat), a date stays text.
// So plain scalars are read as strings (the failsafe schema) and resolved here by go-yaml's
// rules; inject's output quotes every string that kubectl would read as something else.
// test/agent/cli/kubectlyaml.test.ts holds both directions to Go (test/projections/gooracle).

import { Document, parseAllDocuments, Scalar, visit } from 'yaml';

const TRUE = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON']);
const FALSE = new Set(['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF']);
const NULL = new Set(['', '~', 'null', 'Null', 'NULL']);
const SPECIAL: ReadonlyMap<string, number> = new Map([
  ...['.nan', '.NaN', '.NAN'].map((s) => [s, NaN] as const),
  ...['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'].map((s) => [s, Infinity] as const),
  ...['-.inf', '-.Inf', '-.INF'].map((s) => [s, -Infinity] as const),
]);
/** go-yaml's yamlStyleFloat. */
const GO_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
/** What Go's strconv.ParseInt/ParseUint accept with base 0 (underscores already removed). */
const GO_INT = /^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/;
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

/** An integer as Go's ParseInt (or ParseUint) reads `s` (underscores removed), exactly. */
function goInt(s: string): bigint | undefined {
  if (!GO_INT.test(s)) return undefined;
  const neg = s.startsWith('-');
  const body = s.replace(/^[-+]/, '');
  const digits = /^0[oO]/.test(body) ? `0o${body.slice(2)}` : /^0[0-7]+$/.test(body) ? `0o${body.slice(1)}` : body;
  const v = (neg ? -1n : 1n) * BigInt(digits);
  return v < INT64_MIN || v > UINT64_MAX ? undefined : v;
}

/** What go-yaml v2 makes of a plain (unquoted, untagged) scalar decoded into interface{}. */
export function goPlain(s: string): string | number | boolean | null {
  if (TRUE.has(s)) return true;
  if (FALSE.has(s)) return false;
  if (NULL.has(s)) return null;
  const special = SPECIAL.get(s);
  if (special !== undefined) return special;
  if (s[0] === '.') return /^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(s) ? Number(s) : s;
  if (!/^[-+0-9]/.test(s)) return s;
  const plain = s.replaceAll('_', '');
  const int = goInt(plain);
  if (int !== undefined) return Number(int); // past 2^53 JavaScript rounds it, as it rounds kubectl's JSON
  if (GO_FLOAT.test(plain)) return Number(plain);
  return s;
}

/**
 * Resolves the document's plain scalars as go-yaml would; quoted and tagged ones stay
 * strings. A key becomes a string as sigs.k8s.io/yaml makes it one: an integer exactly; a
 * float as JavaScript spells it (Go's 32-bit %g may differ: 1e6 is "1e+06" there, though no
 * manifest field has such keys).
 */
function resolvePlain(doc: Document): void {
  visit(doc, {
    Scalar(key, node) {
      if (node.type !== Scalar.PLAIN || node.tag || typeof node.value !== 'string') return;
      const int = key === 'key' ? goInt(node.value.replaceAll('_', '')) : undefined;
      node.value = int !== undefined && /^[-+0-9]/.test(node.value) ? String(int) : goPlain(node.value);
    },
  });
}

/** A document of the stream that does not parse; `index` counts from 0. */
export class YamlDocumentError extends Error {
  override readonly name = 'YamlDocumentError';
  readonly index: number;
  constructor(index: number, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.index = index;
  }
}

/**
 * Each document of a YAML (or JSON) stream as kubectl reads it; empty documents (a stream
 * ending in `---`) are undefined. Warnings (an unknown directive or tag) change nothing in
 * the result; the library would print them as several lines. Aliases are bounded.
 */
export function readYamlDocuments(text: string): unknown[] {
  return parseAllDocuments(text, { schema: 'failsafe', merge: true, logLevel: 'error' }).map((d, i) => {
    try {
      if (d.errors.length > 0) throw d.errors[0]!;
      resolvePlain(d);
      return d.toJS({ maxAliasCount: 100 }) as unknown;
    } catch (err) {
      throw new YamlDocumentError(i, err);
    }
  });
}

/** YAML that kubectl reads back as `obj`: a string it would read as anything else is quoted. */
export function writeYaml(obj: unknown): string {
  // Without the merge tag, which would print a "<<" key plain, whatever its type.
  const doc = new Document(obj, { version: '1.1', customTags: (tags) => tags.filter((t) => typeof t === 'string' || t.tag !== 'tag:yaml.org,2002:merge') });
  visit(doc, {
    Scalar(_key, node) {
      // "<<" too: a plain one is a merge key.
      if (typeof node.value === 'string' && (goPlain(node.value) !== node.value || node.value === '<<')) node.type = Scalar.QUOTE_DOUBLE;
    },
  });
  return doc.toString({ lineWidth: 0 });
}
