// Applying the webhook's own JSON Patch operations (replace and add at an existing
// object path or list index, remove of an object member) to a copy of an object: what `inject` prints and what the
// API server would store. Not a general RFC 6902 implementation.

import type { PatchOp } from '../admission/webhook/podspec.ts';

function unescape(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~');
}

export function applyPatch<T>(obj: T, ops: readonly PatchOp[]): T {
  const out = structuredClone(obj) as unknown;
  for (const op of ops) {
    const tokens = op.path.split('/').slice(1).map(unescape);
    const last = tokens.pop();
    if (last === undefined) throw new Error(`patch path ${op.path} names the whole document`);
    let at = out;
    for (const t of tokens) {
      at = Array.isArray(at) ? at[Number(t)] : (at as Record<string, unknown>)[t];
      if (typeof at !== 'object' || at === null) throw new Error(`patch path ${op.path} does not exist`);
    }
    if (op.op === 'remove') {
      if (Array.isArray(at) || !Object.hasOwn(at as object, last)) throw new Error(`patch path ${op.path} does not exist`);
      delete (at as Record<string, unknown>)[last];
    } else if (Array.isArray(at)) at[Number(last)] = structuredClone(op.value);
    else (at as Record<string, unknown>)[last] = structuredClone(op.value);
  }
  return out as T;
}
