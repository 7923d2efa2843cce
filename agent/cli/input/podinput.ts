// Reading a Pod manifest the way the API server's Go decoder would: bytes that are not
// UTF-8 become one U+FFFD each (Go's rule; the WHATWG decoder Node uses folds a truncated
// sequence into one), and a field of the wrong type is refused with its path named,
// where a lenient reader would drop it (`controller: "true"`) or make up an owner of
// empty strings. The YAML is read as kubectl reads it (kubectlyaml.ts).

import { open } from 'node:fs/promises';
import { parseQuantity } from '../../../projections/quantity.ts';
import { readYamlDocuments, YamlDocumentError } from './kubectlyaml.ts';
import { type PodView } from '../../node/podview.ts';

export class InputError extends Error {
  override name = 'InputError';
}

/** UTF-8 to a string, each byte of an invalid sequence replaced by U+FFFD, as Go does. */
export function decodeUtf8(buf: Uint8Array): string {
  let out = '';
  for (let i = 0; i < buf.length;) {
    const b = buf[i]!;
    const [len, min, lo, hi] = b < 0x80 ? [1, 0, 0, 0] : b >= 0xc2 && b <= 0xdf ? [2, 0x80, 0x80, 0xbf]
      : b === 0xe0 ? [3, 0x800, 0xa0, 0xbf] : b === 0xed ? [3, 0x800, 0x80, 0x9f] : b >= 0xe1 && b <= 0xef ? [3, 0x800, 0x80, 0xbf]
        : b === 0xf0 ? [4, 0x10000, 0x90, 0xbf] : b >= 0xf1 && b <= 0xf3 ? [4, 0x10000, 0x80, 0xbf] : b === 0xf4 ? [4, 0x10000, 0x80, 0x8f] : [0, 0, 0, 0];
    let cp = len === 1 ? b : len === 2 ? b & 0x1f : len === 3 ? b & 0x0f : b & 0x07;
    let ok = len > 0 && i + len <= buf.length;
    for (let k = 1; ok && k < len; k++) {
      const c = buf[i + k]!;
      if (k === 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) ok = false;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (!ok || cp < min) {
      out += '\ufffd';
      i += 1;
      continue;
    }
    out += String.fromCodePoint(cp);
    i += len;
  }
  return out;
}

type Check = (value: unknown, at: string) => void;

const describeValue = (v: unknown): string => Array.isArray(v) ? 'a list'
  : v === null ? 'null' : typeof v === 'object' ? 'an object'
  : typeof v === 'string' ? `a string (${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)})` : `a ${typeof v}`;
const fail = (at: string, v: unknown, want: string) => {
  throw new InputError(`${at}: ${describeValue(v)}, where Kubernetes expects ${want}`);
};
const optional = (check: Check): Check => (v, at) => { if (v !== undefined && v !== null) check(v, at); };
const string: Check = (v, at) => { if (typeof v !== 'string') fail(at, v, 'a string'); };
const boolean: Check = (v, at) => { if (typeof v !== 'boolean') fail(at, v, 'a boolean (true or false, not quoted)'); };
const object = (fields: Record<string, Check>): Check => (v, at) => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(at, v, 'an object');
  for (const [k, check] of Object.entries(fields)) check((v as Record<string, unknown>)[k], at ? `${at}.${k}` : k);
};
const list = (item: Check): Check => (v, at) => {
  if (!Array.isArray(v)) return fail(at, v, 'a list');
  v.forEach((x, i) => item(x, `${at}[${i}]`));
};
const stringMap: Check = (v, at) => {
  object({})(v, at);
  for (const [k, x] of Object.entries(v as object)) string(x, `${at}[${JSON.stringify(k)}]`);
};

/** A resource list: each value a quantity (a string or a number), as resource.Quantity decodes it. */
const quantities: Check = (v, at) => {
  object({})(v, at);
  for (const [k, x] of Object.entries(v as object)) {
    const where = `${at}[${JSON.stringify(k)}]`;
    if (typeof x !== 'string' && typeof x !== 'number') fail(where, x, 'a quantity (like 500m or 1Gi)');
    else if (parseQuantity(String(x)) === undefined) fail(where, x, 'a quantity (like 500m or 1Gi)');
  }
};
const containers = optional(list(object({ resources: optional(object({ limits: optional(quantities), requests: optional(quantities) })) })));

/** The fields the agent reads, typed as the API server's decoder types them. */
const POD = object({
  kind: optional(string),
  metadata: optional(object({
    name: optional(string), namespace: optional(string), uid: optional(string),
    annotations: optional(stringMap),
    ownerReferences: optional(list(object({
      apiVersion: optional(string), kind: optional(string), name: optional(string), uid: optional(string),
      controller: optional(boolean), blockOwnerDeletion: optional(boolean),
    }))),
  })),
  spec: optional(object({ volumes: optional(list(object({ name: optional(string) }))), containers, initContainers: containers })),
});

/** What the YAML parser refused, in one line (shared by render and inject). */
export function yamlFailure(err: unknown): string {
  if (err instanceof YamlDocumentError) err = err.cause;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof RangeError || /Maximum call stack size exceeded/.test(message)) return 'the input is nested too deeply to be a manifest';
  return `the input is not YAML or JSON: ${message.split('\n')[0]!.replace(/:$/, '')}`;
}

/** One Pod manifest from bytes (YAML or JSON), or an InputError naming what is wrong. */
export function parsePod(bytes: Uint8Array): PodView {
  const text = decodeUtf8(bytes);
  if (text.trim() === '') throw new InputError('the input is empty; give a Pod manifest (YAML or JSON)');
  let docs: unknown[];
  try {
    // Empty documents (a manifest ending in `---`) are skipped, as kubectl skips them.
    docs = readYamlDocuments(text).filter((d) => d !== null && d !== undefined);
  } catch (err) {
    throw new InputError(yamlFailure(err));
  }
  if (docs.length > 1) throw new InputError(`the input holds ${docs.length} YAML documents; give one Pod manifest`);
  if (docs.length === 0) throw new InputError('the input holds only empty YAML documents; give a Pod manifest');
  const doc = docs[0];
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new InputError(`the input is ${describeValue(doc)}, not a Pod manifest`);
  }
  const kind = (doc as { kind?: unknown }).kind;
  if (kind !== undefined && kind !== 'Pod') {
    throw new InputError(typeof kind === 'string' ? `the input is a ${kind}, not a Pod` : `the input's kind is ${describeValue(kind)}, where a Pod has "Pod"`);
  }
  POD(doc, '');
  return doc as PodView;
}

/**
 * The bytes of `source`, or of standard input for "-" or none, at most `maxBytes` of them:
 * a larger input is an InputError (parsing costs tens of times its size in memory). A file
 * that cannot be read is an InputError naming it.
 */
export async function readInput(source: string | undefined, stdin: NodeJS.ReadableStream, maxBytes: number): Promise<Buffer> {
  const tooLarge = () => new InputError(`the input is larger than ${maxBytes / (1024 * 1024)} MiB, more than a manifest of this command can be; split it`);
  if (source === undefined || source === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of stdin) {
      const b = typeof c === 'string' ? Buffer.from(c) : c;
      size += b.length;
      if (size > maxBytes) throw tooLarge();
      chunks.push(b);
    }
    return Buffer.concat(chunks);
  }
  let handle;
  try {
    handle = await open(source, 'r');
    // Read one byte past the bound, never the whole of a larger file (a FIFO has no size to stat).
    const buf = Buffer.alloc(maxBytes + 1);
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, size, buf.length - size);
      if (bytesRead === 0) break;
      size += bytesRead;
      if (size > maxBytes) throw tooLarge();
    }
    return buf.subarray(0, size);
  } catch (err) {
    if (err instanceof InputError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
    throw new InputError(`cannot read ${JSON.stringify(source)}: ${why}`, { cause: err });
  } finally {
    await handle?.close();
  }
}
