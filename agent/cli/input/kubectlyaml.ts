// YAML as kubectl reads it, for `render` and `inject`. kubectl splits a stream at lines
// starting with `---`, decodes each part's first document with go-yaml v2 into interface{}
// (sigs.k8s.io/yaml) and converts that to JSON; JSON input is read as JSON. That is neither
// YAML 1.1 nor 1.2: `yes` and `on` are booleans, `12:30` is text, `0o17` and `1e3` are
// numbers, a date stays text, a merge key (`<<`) overwrites the keys before it, a repeated
// key keeps its last value, and a map key becomes a string by Go's rules. So documents are
// parsed here with every scalar as text (the failsafe schema) and converted by go-yaml's
// rules (goyaml.ts); inject's output quotes every string kubectl would read otherwise.
// test/agent/cli/input/kubectlyaml.test.ts holds both directions to Go (test/projections/gooracle).
//
// Known differences, where the YAML library's scanner is stricter or looser than go-yaml's
// (three reviews looked): a flow collection or quoted scalar continued on a line indented
// less than its key, a comment right after a quote or bracket, and bare CR line breaks are
// refused here and read by kubectl; %YAML/%TAG directives, "\/" escapes, tab-indented
// lines, bad base64 in !!binary and a raw U+FEFF near go-yaml's 512-byte buffer boundary
// are read here and refused by kubectl; !!omap, !!pairs and !!set collections are refused
// here; integers past 2^53 are rounded, in kubectl's JSON as here.

import { Document, isAlias, isMap, isScalar, isSeq, parseAllDocuments, Scalar, visit, type Alias } from 'yaml';
import { goKey, goResolve, type GoScalar } from './goyaml.ts';
import { readJsonStream } from './jsonstream.ts';

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
 * Each document of a YAML stream (or each value of a JSON stream) as kubectl reads it; an
 * empty part (a stream ending in `---`) is undefined. Warnings (an unknown directive) change
 * nothing. A flow collection or a quoted scalar continued on a line indented less than its
 * key is refused here (YAML 1.2's rule), where kubectl's go-yaml reads it.
 */
export function readYamlDocuments(text: string): unknown[] {
  if (/^\s*\{/.test(text)) {
    try {
      const json = readJsonStream(text);
      if (json) return json;
    } catch (err) {
      throw new YamlDocumentError(0, err);
    }
  }
  return parts(text).map((part, i) => {
    try {
      const bad = NOT_YAML.exec(part);
      if (bad) throw new Error(`U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} is not allowed (kubectl's YAML reader refuses it or reads a line break); escape it in a double-quoted string`);
      const doc = parseAllDocuments(part, { schema: 'failsafe', uniqueKeys: false, logLevel: 'error' })[0];
      if (!doc) return undefined;
      if (doc.errors.length > 0) throw doc.errors[0]!;
      return new GoDecoder(doc).decode(doc.contents);
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

/** go-yaml's merge key: "<<" plain, untagged or tagged "!" or !!merge (an alias of one is not). */
function isMergeKey(key: unknown): boolean {
  return isScalar(key) && key.type === Scalar.PLAIN && (key.source ?? key.value) === '<<' &&
    (!key.tag || key.tag === '!' || key.tag === 'tag:yaml.org,2002:merge');
}

/** go-yaml's allowedAliasRatio: how much of a document may come through aliases, by its size. */
function allowedAliasRatio(decoded: number): number {
  if (decoded <= 400_000) return 0.99;
  if (decoded >= 4_000_000) return 0.1;
  return 0.1 + 0.89 * (1 - (decoded - 400_000) / 3_600_000);
}

/** One document decoded as go-yaml decodes into interface{}, with its bound on aliasing. */
class GoDecoder {
  readonly #targets = new Map<Alias, unknown>();
  readonly #inProgress = new Set<unknown>();
  #decoded = 0;
  #throughAliases = 0;
  #aliasDepth = 0;

  constructor(doc: Document) {
    // Each alias's anchor, found once in document order (resolving each alias anew walks the document).
    const anchors = new Map<string, unknown>();
    visit(doc, (_key, node) => {
      if (isAlias(node)) {
        if (!anchors.has(node.source)) throw new Error(`unknown anchor '${node.source}' referenced`);
        this.#targets.set(node, anchors.get(node.source));
      } else if ((isScalar(node) || isMap(node) || isSeq(node)) && node.anchor) {
        anchors.set(node.anchor, node);
      }
    });
  }

  decode(node: unknown): unknown {
    this.#decoded++;
    if (this.#aliasDepth > 0) this.#throughAliases++;
    if (this.#throughAliases > 100 && this.#decoded > 1000 && this.#throughAliases / this.#decoded > allowedAliasRatio(this.#decoded)) {
      throw new Error('document contains excessive aliasing');
    }
    if (node === null || node === undefined) return null;
    if (isAlias(node)) return this.#follow(node, (target) => this.decode(target));
    if (isScalar(node)) {
      const s = scalarOf(node);
      if (s.kind === 'float' && !Number.isFinite(s.value)) throw new Error(`${String(node.source ?? node.value)}: JSON has no infinity or NaN, and kubectl refuses it`);
      return s.value;
    }
    if (isSeq(node)) return node.items.map((item) => this.decode(item));
    if (isMap(node)) return this.#map(node.items);
    throw new Error('an unexpected YAML node');
  }

  #follow<T>(alias: Alias, then: (target: unknown) => T): T {
    const target = this.#targets.get(alias);
    if (this.#inProgress.has(target)) throw new Error(`anchor '${alias.source}' value contains itself`);
    this.#inProgress.add(target);
    this.#aliasDepth++;
    try {
      return then(target);
    } finally {
      this.#aliasDepth--;
      this.#inProgress.delete(target);
    }
  }

  #map(pairs: readonly { key: unknown; value: unknown }[]): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const set = (k: string, v: unknown) => Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
    for (const pair of pairs) {
      if (isMergeKey(pair.key)) {
        // go-yaml's merge: the merged keys overwrite those before; of a list, the first map wins.
        const maps = isSeq(pair.value) ? [...pair.value.items].reverse() : [pair.value];
        for (const m of maps) for (const [k, v] of Object.entries(this.#mergeSource(m))) set(k, v);
        continue;
      }
      const key = isAlias(pair.key) ? this.#targets.get(pair.key) : pair.key;
      if (!isScalar(key)) throw new Error('a map key that is a list or a map: kubectl refuses it');
      set(goKey(scalarOf(key)), this.decode(pair.value));
    }
    return out;
  }

  /** A merge's source must be a map, or an alias of one. */
  #mergeSource(node: unknown): Record<string, unknown> {
    const target = isAlias(node) ? this.#targets.get(node) : node;
    if (!isMap(target)) throw new Error('map merge requires map or sequence of maps as the value');
    return this.decode(node) as Record<string, unknown>;
  }
}

/**
 * YAML that kubectl reads back as `obj`: a string it would read as anything else (a number,
 * a boolean, null, a merge key) is double-quoted, and so is one holding a character it
 * refuses or reads as a line break (escaped there), and a multi-line one whose lines start
 * with blanks or that is blank (a block scalar would lose them, or begin with a tab go-yaml
 * refuses). A lone surrogate is U+FFFD, as in kubectl's JSON.
 */
export function writeYaml(obj: unknown): string {
  // Without the merge tag, which would print a "<<" key plain, whatever its type.
  const doc = new Document(obj, { version: '1.1', customTags: (tags) => tags.filter((t) => typeof t === 'string' || t.tag !== 'tag:yaml.org,2002:merge') });
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value !== 'string') return;
      const s = (node.value = node.value.toWellFormed());
      const blankLines = s.includes('\n') && (/(^|\n)[ \t]/.test(s) || /^[ \t\n]*$/.test(s));
      if (s === '<<' || blankLines || NOT_YAML.test(s) || /[\u0085\u00a0\ufeff]/.test(s) || goResolve('', s).kind !== 'str') node.type = Scalar.QUOTE_DOUBLE;
    },
  });
  // Only double-quoted scalars hold such characters now: escape them there, as the library does
  // not. U+FEFF too: go-yaml's reader fails on one that falls near a 512-byte boundary of its buffer.
  return doc.toString({ lineWidth: 0 }).replace(/[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
