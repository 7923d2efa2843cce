// The grammars pod-controlled and kubelet-supplied names must match before any of them
// becomes a path, a request or a message, and the one way such text is quoted.

import { describe } from '../../projections/describe.ts';

// Quoting and bounding live with the projections, which quote pod text in their problems too.
export { clip, describe } from '../../projections/describe.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
// UIDs are opaque strings to Kubernetes; API server UIDs are UUIDs and static-pod UIDs
// are hashes. We accept one safe path component: no '/', no leading dot.
const POD_UID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** A DNS-1123 label: volume names, namespaces. */
export function isDns1123Label(s: string): boolean {
  return DNS1123_LABEL.test(s);
}

/** A DNS-1123 subdomain: pod names, PersistentVolume names. */
export function isDns1123Subdomain(s: string): boolean {
  return DNS1123_SUBDOMAIN.test(s);
}

/** A pod UID we are willing to use as a path component. */
export function isValidPodUID(uid: string): boolean {
  return POD_UID.test(uid);
}

/**
 * A message made safe for one terminal line: C0 and C1 controls, DEL, the line and paragraph
 * separators and the bidirectional overrides (which reorder what a terminal shows) escaped
 * as \uXXXX; a newline becomes a space. Everything else, non-ASCII text included, is kept.
 */
export function oneLine(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => (c === '\n' ? ' ' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/**
 * An object name for a message: as written when it could be a Kubernetes name (printable
 * ASCII, at most 253), else quoted by describe. Mutation and offline tools see names before
 * the API server has validated them.
 */
export function displayName(v: unknown): string {
  if (typeof v === 'string') return /^[\x21-\x7e]{1,253}$/.test(v) ? v : describe(v);
  // Never stringified: a value nested thousands deep would overflow the stack.
  return `(${Array.isArray(v) ? 'a list' : v === null ? 'null' : typeof v === 'object' ? 'an object' : `a ${typeof v}`}, not a name)`;
}
