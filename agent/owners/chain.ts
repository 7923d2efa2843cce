// A pod's chain of controlling owners, walked through the owner cache (owners/ownermeta.ts):
// pure over the lookups it is given, so every odd case is a table test.
//
//   1. Item 0 is the pod's own controller reference (controller: true); none: NoController.
//   2. A Node (a mirror pod's controller) is the top: nodes have no owners.
//   3. Otherwise look the item's object up. Pending, or an error (NotFound, UIDMismatch,
//      KindNotFollowed, NotServed, Forbidden, Unavailable), ends the chain with that reason.
//   4. The object's controller reference is the next item; none: Top.
//   5. A UID seen before ends it as Cycle; more than MAX_CHAIN items as TooLong.

import type { ControllerChain, OwnerReference } from '../../projections/index.ts';
import type { OwnerLookup } from './ownermeta.ts';

export const MAX_CHAIN = 8;

export interface WalkedChain {
  chain: ControllerChain;
  /** Every owner UID the walk looked up: when one of them changes, walk again. */
  through: string[];
}

function controllerOf(refs: readonly OwnerReference[] | null | undefined): OwnerReference | undefined {
  return refs?.find((r) => r.controller === true);
}

const describeRef = (r: OwnerReference) => `${r.kind} ${r.name}`;

export function walkChain(namespace: string, podOwners: readonly OwnerReference[] | null | undefined,
  lookup: (namespace: string, ref: OwnerReference) => OwnerLookup, max = MAX_CHAIN): WalkedChain {
  const items: OwnerReference[] = [];
  const through: string[] = [];
  let next = controllerOf(podOwners); // step 1
  if (!next) return { chain: { items, end: { reason: 'NoController', message: 'the pod has no controlling owner' } }, through };
  for (;;) {
    if (items.some((i) => i.uid === next!.uid)) { // step 5
      return { chain: { items, end: { reason: 'Cycle', message: `${describeRef(next)} (${next.uid}) appears twice in the chain` } }, through };
    }
    if (items.length >= max) {
      return { chain: { items, end: { reason: 'TooLong', message: `the chain is longer than ${max} owners; the agent follows no further` } }, through };
    }
    items.push(next);
    if (next.kind === 'Node' && next.apiVersion === 'v1') return { chain: { items, end: { reason: 'Top', message: 'a Node has no owners' } }, through }; // step 2
    through.push(next.uid);
    const found = lookup(namespace, next); // step 3
    if (found.state === 'pending') return { chain: { items, end: { reason: 'Pending', message: `reading ${describeRef(next)}` } }, through };
    if (found.state === 'error') return { chain: { items, end: { reason: found.reason, message: found.message } }, through };
    const up = controllerOf(found.ownerReferences); // step 4
    if (!up) return { chain: { items, end: { reason: 'Top', message: `${describeRef(next)} has no controlling owner` } }, through };
    next = up;
  }
}
