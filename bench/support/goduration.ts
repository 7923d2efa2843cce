// Go's time.Duration as its String method prints it, which is how the kubelet says how long
// a pull took in its Pulled event ("in 1.234s (1.234s including waiting)").

/** A Go duration as the kubelet prints it (1m2.5s, 834.2ms, 950µs), in milliseconds. */
export function goDurationMs(s: string): number {
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1, 'µs': 1e-3, us: 1e-3, ns: 1e-6 };
  let ms = 0;
  let rest = s;
  for (const m of s.matchAll(/([\d.]+)(h|ms|m|s|µs|us|ns)/g)) { ms += Number(m[1]) * units[m[2]!]!; rest = rest.replace(m[0], ''); }
  if (rest !== '' || s === '') throw new Error(`not a Go duration: ${JSON.stringify(s)}`);
  return ms;
}
