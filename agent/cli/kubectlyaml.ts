// YAML as kubectl reads it, for `render` and `inject`. kubectl splits a stream at lines
// starting with `---`, decodes each part's first document with go-yaml v2 into interface{}
// (sigs.k8s.io/yaml) and converts that to JSON; JSON input is read as JSON. That is neither
// YAML 1.1 nor 1.2: `yes` and `on` are booleans, `12:30` is text, `0o17` and `1e3` are
// numbers, a date stays text, a merge key (`<<`) overwrites the keys before it, a repeated
// key keeps its last value, and a map key becomes a string by Go's rules. So documents are
// parsed here with every scalar as text (the failsafe schema) and converted by go-yaml's
// rules (goyaml.ts); inject's output quotes every string kubectl would read otherwise.
// test/agent/cli/kubectlyaml.test.ts holds both directions to Go (test/projections/gooracle).

import { Document, isAlias, isMap, isScalar, isSeq, parseAllDocuments, Scalar, visit } from 'yaml';
import { goKey, goResolve, type GoScalar } from './goyaml.ts';

/** A document of the stream that does not parse; `index` counts from 0. */
export class YamlDocumentError extends Error {
  override readonly name = 'YamlDocumentError';
  readonly index: number;
  constructor(index: number, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.index = index;
  }
}

/** Aliases followed per document: enough for any manifest, and a bound on expansion bombs. */
const MAX_ALIASES = 100;

/**
 * Characters go-yaml refuses (it accepts tab, line feed, carriage return, printable ASCII
 * and most of Unicode), and U+0085, U+2028 and U+2029, which it reads as line breaks.
 */
const NOT_YAML = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]/u;

/** kubectl's split: a line starting `---` ends a part; only spaces or a comment may follow it. */
function parts(text: string): string[] {
  const out: string[] = [];
  let current: string[] = [];
  for (const line of text.split(/(?<=\n)/)) {
    if (!line.startsWith('---')) {
      current.push(line);
      continue;
    }
    const rest = line.slice(3).trim();
    if (rest !== '' && !rest.startsWith('#')) throw new YamlDocumentError(out.length, new Error(`a document separator line holds ${JSON.stringify(rest.slice(0, 20))}; only a comment may follow ---`));
    out.push(current.join(''));
    current = [];
  }
  out.push(current.join(''));
  return out;
}

/**
 * Each document of a YAML stream (or one JSON value) as kubectl reads it; an empty part (a
 * stream ending in `---`) is undefined. Warnings (an unknown directive) change nothing.
 */
export function readYamlDocuments(text: string): unknown[] {
  if (/^\s*[[{]/.test(text)) {
    try {
      return [JSON.parse(text) as unknown];
    } catch {
      // not one JSON value: read as YAML, whose errors say where
    }
  }
  return parts(text).map((part, i) => {
    try {
      const bad = NOT_YAML.exec(part);
      if (bad) throw new Error(`U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} is not allowed (kubectl's YAML reader refuses it or reads a line break); escape it in a double-quoted string`);
      const doc = parseAllDocuments(part, { schema: 'failsafe', uniqueKeys: false, logLevel: 'error' })[0];
      if (!doc) return undefined;
      if (doc.errors.length > 0) throw doc.errors[0]!;
      const aliases = { left: MAX_ALIASES };
      return toGo(doc.contents, doc, aliases);
    } catch (err) {
      throw err instanceof YamlDocumentError ? err : new YamlDocumentError(i, err);
    }
  });
}

function scalarOf(node: Scalar): GoScalar {
  // The library resolves !!binary and !!timestamp even in the failsafe schema: their text is the source.
  const text = typeof node.value === 'string' ? node.value : node.source ?? String(node.value);
  if (node.tag === '!' || (node.type !== Scalar.PLAIN && !node.tag)) return { kind: 'str', value: text }; // "!": non-specific, a string
  return goResolve(node.tag ?? '', text);
}

/** The node an alias stands for (each counted against the document's bound), or the node itself. */
function deref(node: unknown, doc: Document, aliases: { left: number }): unknown {
  if (!isAlias(node)) return node;
  if (--aliases.left < 0) throw new Error(`more than ${MAX_ALIASES} aliases: refused as an expansion bomb`);
  return node.resolve(doc);
}

function toGo(node: unknown, doc: Document, aliases: { left: number }): unknown {
  node = deref(node, doc, aliases);
  if (node === null || node === undefined) return null;
  if (isScalar(node)) {
    const s = scalarOf(node);
    if (s.kind === 'float' && !Number.isFinite(s.value)) throw new Error(`${String(node.value)}: JSON has no infinity or NaN, and kubectl refuses it`);
    return s.value;
  }
  if (isSeq(node)) return node.items.map((item) => toGo(item, doc, aliases));
  if (isMap(node)) {
    const out: Record<string, unknown> = {};
    const set = (k: string, v: unknown) => Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
    for (const pair of node.items) {
      const key = deref(pair.key, doc, aliases);
      if (isScalar(key) && key.type === Scalar.PLAIN && !key.tag && key.value === '<<') {
        // go-yaml's merge: the merged keys overwrite those before; of a list, the first map wins.
        const source = deref(pair.value, doc, aliases);
        const maps = isSeq(source) ? [...source.items].reverse().map((m) => deref(m, doc, aliases)) : [source];
        for (const m of maps) {
          if (!isMap(m)) throw new Error('map merge requires map or sequence of maps as the value');
          for (const [k, v] of Object.entries(toGo(m, doc, aliases) as Record<string, unknown>)) set(k, v);
        }
        continue;
      }
      const k = isScalar(key) ? scalarOf(key) : undefined;
      if (!k) throw new Error('a map key that is a list or a map: kubectl refuses it');
      set(goKey(k), toGo(pair.value, doc, aliases));
    }
    return out;
  }
  throw new Error('an unexpected YAML node');
}

/**
 * YAML that kubectl reads back as `obj`: a string it would read as anything else (a number,
 * a boolean, null, a merge key) is quoted, and so is one holding a character it refuses or
 * reads as a line break (escaped inside double quotes).
 */
export function writeYaml(obj: unknown): string {
  // Without the merge tag, which would print a "<<" key plain, whatever its type.
  const doc = new Document(obj, { version: '1.1', customTags: (tags) => tags.filter((t) => typeof t === 'string' || t.tag !== 'tag:yaml.org,2002:merge') });
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value !== 'string') return;
      const s = node.value;
      if (s === '<<' || NOT_YAML.test(s) || /[\u0085\u00a0\ufeff]/.test(s) || goResolve('', s).kind !== 'str') node.type = Scalar.QUOTE_DOUBLE;
    },
  });
  // Only double-quoted scalars hold such characters now: escape them there, as the library does not.
  return doc.toString({ lineWidth: 0 }).replace(/[\x7f-\x9f\u2028\u2029\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
