// CEL shared by the manifests: what "a pod spec reads a field path" means, written once so
// that the webhook's match conditions and the forbid policy agree on it.

/** A CEL string literal. */
export const celString = (s: string): string => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/** `root.a.b.c` for the path [a, b, c]. */
export const celPath = (root: string, path: readonly string[]): string => [root, ...path].join('.');

/** CEL: does the pod spec at `s` have a fieldRef with one of `paths`, in env or a downwardAPI or projected volume item? */
export function specUses(s: string, paths: readonly string[]): string {
  const fields = `[${paths.map(celString).join(', ')}]`;
  const env = (list: string) =>
    `(has(${s}.${list}) && ${s}.${list}.exists(c, has(c.env) && c.env.exists(e, has(e.valueFrom) && has(e.valueFrom.fieldRef) && e.valueFrom.fieldRef.fieldPath in ${fields})))`;
  const items = (src: string) => `has(${src}.items) && ${src}.items.exists(i, has(i.fieldRef) && i.fieldRef.fieldPath in ${fields})`;
  const volumes = `(has(${s}.volumes) && ${s}.volumes.exists(v, (has(v.downwardAPI) && ${items('v.downwardAPI')}) || ` +
    `(has(v.projected) && has(v.projected.sources) && v.projected.sources.exists(p, has(p.downwardAPI) && ${items('p.downwardAPI')}))))`;
  return [env('containers'), env('initContainers'), env('ephemeralContainers'), volumes].join(' || ');
}
