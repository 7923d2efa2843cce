// The KEP-4753 document: {"kind":"OwnerReference","apiVersion":"meta/v1","items":[...]},
// byte-for-byte what Go's json.Marshal gives for that wrapper around
// []metav1.OwnerReference (field order and omitempty as in the Go struct tags).

import { goArray, goObject, goString } from './gojson.ts';
import type { OwnerReference } from './types.ts';

/** Encode one owner; `full` keeps controller/blockOwnerDeletion (when present on the pod). */
export function encodeOwner(o: OwnerReference, full: boolean): string {
  // Written out rather than through goObject: every file of every pod encodes its owners,
  // and this allocates only the result.
  let out = '{"apiVersion":' + goString(o.apiVersion ?? '') + ',"kind":' + goString(o.kind ?? '') +
    ',"name":' + goString(o.name ?? '') + ',"uid":' + goString(o.uid ?? '');
  if (full) {
    // *bool omitempty: nil is omitted, a pointer to false is written.
    if (typeof o.controller === 'boolean') out += ',"controller":' + String(o.controller);
    if (typeof o.blockOwnerDeletion === 'boolean') out += ',"blockOwnerDeletion":' + String(o.blockOwnerDeletion);
  }
  return out + '}';
}

/** The KEP document as a string (no trailing newline; empty owners give "items":[]). */
export function renderOwnerReferencesJson(owners: readonly OwnerReference[]): string {
  return goObject([
    ['kind', goString('OwnerReference')],
    ['apiVersion', goString('meta/v1')],
    ['items', goArray(owners.map((o) => encodeOwner(o, true)))],
  ]);
}

/**
 * Owners ready to paste into metadata.ownerReferences of objects the pod creates.
 * controller and blockOwnerDeletion are dropped: copying them would claim the owner's
 * controller manages the new object, and blockOwnerDeletion needs update rights on
 * the owner's finalizers under OwnerReferencesPermissionEnforcement.
 */
export function renderDependentsJson(owners: readonly OwnerReference[]): string {
  return goArray(owners.map((o) => encodeOwner(o, false)));
}
