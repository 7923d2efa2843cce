// kubectl's JSON path: input that starts with `{` is read as a stream of JSON values (Go's
// json.Decoder), not as YAML. Values as Go's encoding/json gives them: a number too large
// for a float64 is an error, a lone surrogate escape is U+FFFD, nesting stops at 10,000.

/** Go's encoding/json nesting limit. */
const MAX_DEPTH = 10_000;

/** The JSON values of `text`, one after another (whitespace between), or undefined if it is not such a stream. */
export function readJsonStream(text: string): unknown[] | undefined {
  const values: unknown[] = [];
  let i = 0;
  while (i < text.length) {
    while (i < text.length && /\s/.test(text[i]!)) i++;
    if (i === text.length) break;
    const end = valueEnd(text, i);
    if (end === undefined) return undefined;
    let v: unknown;
    try {
      v = JSON.parse(text.slice(i, end), revive);
    } catch (err) {
      if (err instanceof JsonValueError) throw err;
      return undefined;
    }
    checkDepth(v);
    values.push(v);
    i = end;
  }
  return values.length > 0 ? values : undefined;
}

/** A value JSON can hold but Go's encoding/json refuses (kubectl fails on it too). */
export class JsonValueError extends Error {
  override readonly name = 'JsonValueError';
}

function revive(_key: string, v: unknown): unknown {
  if (typeof v === 'number' && !Number.isFinite(v)) throw new JsonValueError('a number too large for a float64: kubectl cannot read it either');
  return typeof v === 'string' ? v.toWellFormed() : v;
}

/** Where the object or array starting at `start` ends (one past its closing bracket), or undefined. */
function valueEnd(text: string, start: number): number | undefined {
  if (text[start] !== '{' && text[start] !== '[') return undefined;
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '{' || c === '[') {
      depth++;
    } else if (c === '}' || c === ']') {
      if (--depth === 0) return i + 1;
    }
  }
  return undefined;
}

function checkDepth(v: unknown): void {
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length > 0) {
    const [x, d] = stack.pop()!;
    if (typeof x !== 'object' || x === null) continue;
    if (d > MAX_DEPTH) throw new JsonValueError(`nested more than ${MAX_DEPTH} deep: kubectl cannot read it either`);
    for (const y of Object.values(x)) stack.push([y, d + 1]);
  }
}
