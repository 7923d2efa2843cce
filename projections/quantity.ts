// Kubernetes resource quantities ("500m", "1Gi", "1.5", "12e6") as exact rationals, and the
// two roundings the downward API uses: Value() and MilliValue(), both rounded up, as
// k8s.io/apimachinery's resource.Quantity does. The grammar is the one ParseQuantity
// accepts: sign, digits with an optional fraction, then a binary suffix (Ki..Ei), a
// decimal one (n u m "" k M G T P E) or an exponent (e/E and a signed integer).

/** num/den, den > 0. */
export interface Rational {
  num: bigint;
  den: bigint;
}

const BINARY: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const GRAMMAR = /^([+-]?)(\d*)(?:\.(\d*))?(.*)$/;
/** Exponents beyond this are refused (Go refuses values out of its int64-scaled range too). */
const MAX_EXPONENT = 30;

/** The quantity's exact value, or undefined when `s` is not a quantity. */
export function parseQuantity(s: string): Rational | undefined {
  const m = GRAMMAR.exec(s.trim() === s ? s : '');
  if (!m) return undefined;
  const [, sign, whole = '', frac = '', suffix = ''] = m;
  if (whole === '' && frac === '') return undefined;
  if (s.includes('.') && frac === '' && whole === '') return undefined;
  let num = BigInt(whole + frac || '0');
  let den = 10n ** BigInt(frac.length);
  const binary = BINARY[suffix];
  let exp10: number;
  if (binary !== undefined) {
    num *= binary;
    exp10 = 0;
  } else if (suffix in DECIMAL) {
    exp10 = DECIMAL[suffix]!;
  } else {
    const e = /^[eE]([+-]?\d+)$/.exec(suffix);
    if (!e) return undefined;
    exp10 = Number(e[1]);
    if (!Number.isSafeInteger(exp10) || Math.abs(exp10) > MAX_EXPONENT) return undefined;
  }
  if (exp10 >= 0) num *= 10n ** BigInt(exp10);
  else den *= 10n ** BigInt(-exp10);
  if (sign === '-') num = -num;
  return { num, den };
}

/** Ceiling of n/d for d > 0. */
function ceilDiv(n: bigint, d: bigint): bigint {
  const q = n / d;
  return n % d !== 0n && n > 0n ? q + 1n : q;
}

/** Quantity.Value(): the value rounded up to an integer. */
export function value(q: Rational): bigint {
  return ceilDiv(q.num, q.den);
}

/** Quantity.MilliValue(): the value in thousandths, rounded up. */
export function milliValue(q: Rational): bigint {
  return ceilDiv(q.num * 1000n, q.den);
}

export function isZero(q: Rational): boolean {
  return q.num === 0n;
}

export function equal(a: Rational, b: Rational): boolean {
  return a.num * b.den === b.num * a.den;
}

/**
 * int64(math.Ceil(float64(a) / float64(b))) as Go computes it: each int64 rounded to the
 * nearest double first (BigInt to Number rounds the same way), then a double division.
 */
export function goCeilRatio(a: bigint, b: bigint): string {
  const r = Math.ceil(Number(a) / Number(b));
  return Number.isFinite(r) ? BigInt(r).toString() : '0';
}
