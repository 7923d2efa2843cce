// CEL that writes JSON byte for byte as Go's encoding/json does (projections/gojson.ts), for
// the values the admission policy sets. Kubernetes' CEL has no JSON encoder, so a document is
// joined from strings, and each string from the object is escaped with replace(): only when
// a regular expression finds a character that needs it, so a plain name costs one scan.

/** A CEL string literal of any text: quotes, backslashes and controls escaped (CEL's own \u escapes). */
export function celLiteral(s: string): string {
  let out = "'";
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\' || ch === "'") out += '\\' + ch;
    else if (c < 0x20 || c === 0x2028 || c === 0x2029 || c === 0x7f) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += ch;
  }
  return out + "'";
}

const hex4 = (c: number) => c.toString(16).padStart(4, '0');

/** Go's escapes, in the order they must be applied (the backslash first, so none is escaped twice). */
export const GO_ESCAPES: readonly (readonly [from: string, to: string])[] = [
  ['\\', '\\\\'],
  ['"', '\\"'],
  ...Array.from({ length: 0x20 }, (_, c): [string, string] => [String.fromCharCode(c), ({ 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t' } as Record<number, string>)[c] ?? `\\u${hex4(c)}`]),
  ['<', '\\u003c'],
  ['>', '\\u003e'],
  ['&', '\\u0026'],
  ['\u2028', '\\u2028'],
  ['\u2029', '\\u2029'],
];

/** RE2: any character GO_ESCAPES changes. */
const NEEDS_ESCAPE = '[\\x00-\\x1f"\\\\<>&\\x{2028}\\x{2029}]';

/** CEL: the Go-marshalled JSON string literal (quotes included) of the CEL string expression `s`. */
export function celGoString(s: string): string {
  const escaped = GO_ESCAPES.reduce((e, [from, to]) => `${e}.replace(${celLiteral(from)}, ${celLiteral(to)})`, s);
  return `'"' + (${s}.matches(${celLiteral(NEEDS_ESCAPE)}) ? ${escaped} : ${s}) + '"'`;
}

/** CEL: ',"<field>":true', ',"<field>":false' or '' as the optional bool `o.<field>` is set (Go's *bool omitempty). */
function celOptionalBool(o: string, field: string): string {
  return `(has(${o}.${field}) ? (${o}.${field} ? ${celLiteral(`,"${field}":true`)} : ${celLiteral(`,"${field}":false`)}) : '')`;
}

/**
 * CEL: the KEP document for the CEL list of owner references `owners`, the bytes that
 * projections/ownerreferences.ts's renderOwnerReferencesJson gives (Go's field order).
 */
export function celOwnerReferencesJson(owners: string): string {
  const owner = `${celLiteral('{"apiVersion":')} + ${celGoString('o.apiVersion')} + ${celLiteral(',"kind":')} + ${celGoString('o.kind')}` +
    ` + ${celLiteral(',"name":')} + ${celGoString('o.name')} + ${celLiteral(',"uid":')} + ${celGoString('o.uid')}` +
    ` + ${celOptionalBool('o', 'controller')} + ${celOptionalBool('o', 'blockOwnerDeletion')} + '}'`;
  return `${celLiteral('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[')} + ${owners}.map(o, ${owner}).join(',') + ']}'`;
}
