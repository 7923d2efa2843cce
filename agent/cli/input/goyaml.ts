// go-yaml v2's scalars, as kubectl's reader (sigs.k8s.io/yaml) sees them: what a scalar
// resolves to (its resolve(tag, in) for the core tags), and how a map key becomes a JSON
// object key. Pure; kubectlyaml.ts walks the documents.

/** A resolved scalar; an int keeps its exact value (JavaScript numbers round past 2^53). */
export type GoScalar =
  | { kind: 'str'; value: string }
  | { kind: 'int'; value: number; exact: bigint }
  | { kind: 'float'; value: number }
  | { kind: 'bool'; value: boolean }
  | { kind: 'null'; value: null };

const TAG = 'tag:yaml.org,2002:';
/** Tags go-yaml resolves; any other keeps the text as a string. */
const RESOLVABLE = new Set(['', `${TAG}str`, `${TAG}bool`, `${TAG}int`, `${TAG}float`, `${TAG}null`, `${TAG}timestamp`]);

const MAP: ReadonlyMap<string, GoScalar> = new Map<string, GoScalar>([
  ...['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'].map((s) => [s, { kind: 'bool', value: true }] as const),
  ...['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'].map((s) => [s, { kind: 'bool', value: false }] as const),
  ...['', '~', 'null', 'Null', 'NULL'].map((s) => [s, { kind: 'null', value: null }] as const),
  ...['.nan', '.NaN', '.NAN'].map((s) => [s, { kind: 'float', value: NaN }] as const),
  ...['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'].map((s) => [s, { kind: 'float', value: Infinity }] as const),
  ...['-.inf', '-.Inf', '-.INF'].map((s) => [s, { kind: 'float', value: -Infinity }] as const),
]);
/** The first characters go-yaml looks further at ("hint"); a scalar starting otherwise is a string. */
const HINTED = /^[-+0-9yYnNtTfFoO~.]/;
/** go-yaml's yamlStyleFloat. */
const GO_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
/** What Go's strconv.ParseInt/ParseUint accept with base 0 (underscores already removed). */
const GO_INT = /^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/;
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;
/** go-yaml's timestamp formats start with a four-digit year and a dash. */
const TIMESTAMP = /^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?$/;

function goInt(s: string): bigint | undefined {
  if (!GO_INT.test(s)) return undefined;
  const body = s.replace(/^[-+]/, '');
  const digits = /^0[oO]/.test(body) ? `0o${body.slice(2)}` : /^0[0-7]+$/.test(body) ? `0o${body.slice(1)}` : body;
  const v = (s.startsWith('-') ? -1n : 1n) * BigInt(digits);
  return v < INT64_MIN || v > UINT64_MAX ? undefined : v;
}

/** Go's ParseFloat on a decimal: an overflow is an error, and the text stays a string. */
function goFloat(s: string): number | undefined {
  const f = Number(s);
  return Number.isFinite(f) ? f : undefined;
}

/** What go-yaml makes of a plain, untagged scalar (the timestamp a string, as it is kept for interface{}). */
function resolvePlain(s: string): GoScalar & { timestamp?: true } {
  if (!HINTED.test(s) && s !== '') return { kind: 'str', value: s };
  const known = MAP.get(s);
  if (known) return known;
  if (s.startsWith('.')) {
    const f = /^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(s) ? goFloat(s) : undefined;
    return f === undefined ? { kind: 'str', value: s } : { kind: 'float', value: f };
  }
  if (/^[-+0-9]/.test(s)) {
    if (TIMESTAMP.test(s)) return { kind: 'str', value: s, timestamp: true };
    const plain = s.replaceAll('_', '');
    const int = goInt(plain);
    if (int !== undefined) return { kind: 'int', value: Number(int), exact: int };
    const f = GO_FLOAT.test(plain) ? goFloat(plain) : undefined;
    if (f !== undefined) return { kind: 'float', value: f };
  }
  return { kind: 'str', value: s };
}

/**
 * go-yaml's resolve(tag, in): `tag` is the scalar's explicit tag ('' when it has none; a
 * quoted scalar without one is a string before this is asked). Throws as go-yaml fails
 * ("cannot decode !!str `x` as a !!int").
 */
export function goResolve(tag: string, s: string): GoScalar {
  if (tag === `${TAG}str`) return { kind: 'str', value: s };
  if (tag === `${TAG}binary`) return { kind: 'str', value: Buffer.from(s.replace(/\s+/g, ''), 'base64').toString('utf8') };
  if (!RESOLVABLE.has(tag)) return { kind: 'str', value: s }; // another tag: the text, as go-yaml leaves it
  const r = resolvePlain(s);
  if (tag === '') return r;
  const got = r.timestamp ? 'timestamp' : r.kind;
  const want = tag.slice(TAG.length);
  if (got === want) return r;
  if (want === 'float' && r.kind === 'int') return { kind: 'float', value: r.value };
  throw new Error(`cannot decode !!${got} \`${s.length > 40 ? `${s.slice(0, 40)}...` : s}\` as a !!${want}`);
}

/** A map key as sigs.k8s.io/yaml turns it into a JSON object key; Go refuses null keys and uint64 ones. */
export function goKey(k: GoScalar): string {
  switch (k.kind) {
    case 'str': return k.value;
    case 'bool': return String(k.value);
    case 'int':
      if (k.exact > 2n ** 63n - 1n) throw new Error(`unsupported map key of type uint64: ${k.exact}`);
      return String(k.exact);
    case 'float': return formatFloat32(k.value);
    case 'null': throw new Error('unsupported map key: null');
  }
}

/** Go's strconv.FormatFloat(f, 'g', -1, 32), with go-yaml's spellings of infinity and NaN. */
export function formatFloat32(f: number): string {
  if (Number.isNaN(f)) return '.nan';
  if (!Number.isFinite(f)) return f > 0 ? '.inf' : '-.inf';
  const f32 = Math.fround(f);
  if (f32 === 0) return Object.is(f32, -0) ? '-0' : '0';
  if (!Number.isFinite(f32)) return f32 > 0 ? '.inf' : '-.inf'; // past float32's range: Go's +Inf, which sigs.k8s.io/yaml spells so
  let mantissa = '';
  let exp = 0;
  for (let p = 1; p <= 9; p++) { // the shortest digits that read back as the same float32
    const [m, e] = Math.abs(f32).toExponential(p - 1).split('e') as [string, string];
    if (Math.fround(Number(`${m}e${e}`)) === Math.abs(f32)) {
      mantissa = m.replace('.', '');
      exp = Number(e);
      break;
    }
  }
  const sign = f32 < 0 ? '-' : '';
  if (exp < -4 || exp >= 6) { // %e when the exponent is under -4 or at least 6 (the shortest precision's rule)
    const frac = mantissa.length > 1 ? `.${mantissa.slice(1)}` : '';
    return `${sign}${mantissa[0]}${frac}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  const point = exp + 1; // digits before the decimal point
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${mantissa}`;
  if (point >= mantissa.length) return `${sign}${mantissa}${'0'.repeat(point - mantissa.length)}`;
  return `${sign}${mantissa.slice(0, point)}.${mantissa.slice(point)}`;
}
