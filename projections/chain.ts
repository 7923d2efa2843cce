// Files beyond the KEP: the pod's chain of controlling owners, the workload at its top,
// and the pod's Node as an owner. Same discipline as the KEP file: each owner is Go's
// encoding of metav1.OwnerReference, byte for byte (ownerreferences.ts).
//
//   controllerChain           {"kind":"ControllerChain","apiVersion":"ownerrefs.dev/v1",
//                              "items":[<OwnerReference>, ...],          nearest first
//                              "end":{"reason":"...","message":"..."}}  why the chain stops
//   workloadOwnerReferences   [<top of the chain>], ready to paste (controller and
//                              blockOwnerDeletion dropped, as in dependentOwnerReferences);
//                              [] for a pod with no controller
//   nodeOwnerReferences       [{"apiVersion":"v1","kind":"Node","name":...,"uid":...}]

import { goArray, goObject, goString } from './gojson.ts';
import { encodeOwner } from './ownerreferences.ts';
import type { KeepRule, OwnerReference } from './types.ts';

/**
 * Why a chain stops where it does (`end.reason`), each with what it means: a program reads
 * the reason, a person the message. docs/reference/files.md is generated from this table.
 */
export const CHAIN_END_REASONS = {
  Top: 'the last owner has no controller: it is the workload (a Node, a mirror pod\'s controller, is a top too)',
  NoController: 'the pod itself has no controlling owner (a bare pod)',
  Pending: 'the next owner is being read; the file is written again when it is',
  NotFound: 'the next owner does not exist (deleted: the garbage collector will act)',
  UIDMismatch: 'an object of that name exists with another UID (the garbage collector\'s rule: the owner is gone)',
  KindNotFollowed: 'the next owner\'s kind is not on the node\'s list of kinds to follow (--follow-kinds)',
  NotServed: 'the API server does not serve that kind',
  Forbidden: 'the agent may not read that kind (RBAC: rbac-follow-owners.yaml)',
  Cycle: 'an owner appears twice',
  TooLong: 'more owners than the agent follows',
  Unavailable: 'reading the owner failed (retried)',
  NotFollowed: '(a volume item asked for the chain) this node does not follow owners',
} as const;

export type ChainEnd = keyof typeof CHAIN_END_REASONS;

/**
 * Ends that say something about the reader, not the owner: the next owner is being read, its
 * read failed, or this reader may not or cannot read its kind (RBAC, a kind not served or not
 * followed, which a helm upgrade or two components' differing flags can make true for a while).
 * A value already in place is kept over such a chain: an error never blanks a known workload.
 */
export const UNSETTLED_END_NAMES: readonly ChainEnd[] = ['Pending', 'Unavailable', 'Forbidden', 'NotServed', 'KindNotFollowed'];
const UNSETTLED_ENDS: ReadonlySet<ChainEnd> = new Set(UNSETTLED_END_NAMES);

const SETTLED_END_REASONS = (Object.keys(CHAIN_END_REASONS) as ChainEnd[]).filter((r) => !UNSETTLED_ENDS.has(r));

/** Does the chain say what the owners are (true), or only how far the reader got (false)? */
export function isSettled(chain: ControllerChain): boolean {
  return !UNSETTLED_ENDS.has(chain.end.reason);
}

export interface ControllerChain {
  /** Controlling owner references, nearest first; item k is read from the object of item k-1 (item 0 from the pod). */
  items: readonly OwnerReference[];
  end: { reason: ChainEnd; message: string };
}

export interface NodeRef {
  name: string;
  uid: string;
}

const CHAIN_KIND = goString('ControllerChain');
const CHAIN_API_VERSION = goString('ownerrefs.dev/v1');

export function renderChainJson(chain: ControllerChain): string {
  return goObject([
    ['kind', CHAIN_KIND],
    ['apiVersion', CHAIN_API_VERSION],
    ['items', goArray(chain.items.map((o) => encodeOwner(o, true)))],
    ['end', goObject([['reason', goString(chain.end.reason)], ['message', goString(chain.end.message)]])],
  ]);
}

/** The end of `value`, a chain as rendered (renderChainJson), if it says only how far a reader got; else (settled, or no chain) undefined. */
export function unsettledEndOfChainJson(value: string): ChainEnd | undefined {
  try {
    const reason = (JSON.parse(value) as Partial<ControllerChain>).end?.reason;
    return typeof reason === 'string' && UNSETTLED_ENDS.has(reason as ChainEnd) ? reason as ChainEnd : undefined;
  } catch {
    return undefined;
  }
}

/**
 * While the chain is unsettled (isSettled) it knows its first items only: a
 * chain file in place (at `chainPath`) that starts with them and goes on with more items, or
 * stops there for a settled reason, and the workload file beside it if it is exactly the
 * workload of that chain, may stay (KeepRule), so an agent restart or a failing read never
 * turns a known workload into []. A read that fails replaces a file in place that failed
 * otherwise or was Pending: the Forbidden that followed a Pending is written. Undefined for a settled
 * chain, or one that knows no item.
 */
export function keepWhileUnsettled(chain: ControllerChain, chainPath: string, rendered?: string): { chain: KeepRule; workload: KeepRule } | undefined {
  if (isSettled(chain) || chain.items.length === 0) return undefined;
  const full = rendered ?? renderChainJson(chain); // the caller's renderChainJson(chain), if it has it
  const known = full.slice(0, full.lastIndexOf('],"end":')); // the end object's strings cannot hold '"' unescaped
  const group = 'controllerChain';
  // Pending keeps whatever in place has these items; an error keeps a settled end or its own
  // (a retry that fails again rewrites nothing), and replaces another reader-side end.
  const stopsHere = chain.end.reason === 'Pending' ? [Buffer.from(known + ']')]
    : [...SETTLED_END_REASONS, chain.end.reason].map((r) => Buffer.from(`${known}],"end":{"reason":${goString(r)},`));
  return {
    chain: { group, prefixes: [Buffer.from(known + ','), ...stopsHere] },
    workload: { group, prefixes: [Buffer.from('[')], matches: { of: chainPath, derive: workloadOfChainFile } },
  };
}

/** The workload file that goes with a chain file's bytes, or undefined if they are not a chain. */
export function workloadOfChainFile(bytes: Buffer): Buffer | undefined {
  try {
    const c = JSON.parse(bytes.toString('utf8')) as ControllerChain;
    if (!Array.isArray(c.items) || typeof c.end?.reason !== 'string') return undefined;
    return Buffer.from(renderWorkloadJson(c), 'utf8');
  } catch {
    return undefined; // not JSON, or an item that does not encode: not ours to keep
  }
}

/** The workload: the chain's last item, if the chain reached its top; else [] (no guess). */
export function renderWorkloadJson(chain: ControllerChain): string {
  const top = chain.items.at(-1);
  return goArray(top && chain.end.reason === 'Top' ? [encodeOwner(top, false)] : []);
}

export function renderNodeOwnerJson(node: NodeRef): string {
  return goArray([encodeOwner({ apiVersion: 'v1', kind: 'Node', name: node.name, uid: node.uid }, false)]);
}
