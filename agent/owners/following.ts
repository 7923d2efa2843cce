// What a pod's files need beyond the pod: its Node (nodeOwnerReferences) and, when the node
// follows owners, its controller chain (chain.ts over owners/ownermeta.ts). Remembers which
// owners each pod's chain passed through, so that an owner's change re-renders exactly
// the pods it concerns, and a thousand pods of one ReplicaSet cost one read.

import type { NodeRef, OwnerReference, ProjectionContext } from '../../projections/index.ts';
import type { NodeSettings } from '../node/nodeconfig.ts';
import type { OwnerMetadataCache } from './ownermeta.ts';
import { walkChain } from './chain.ts';

export class OwnerFollowing {
  readonly #cache: Pick<OwnerMetadataCache, 'lookup'> | undefined;
  /** Pod uid -> owner UIDs its chain passed through; and the reverse. */
  readonly #through = new Map<string, readonly string[]>();
  readonly #dependents = new Map<string, Set<string>>();
  #node: NodeRef | undefined;

  constructor(cache: Pick<OwnerMetadataCache, 'lookup'> | undefined) {
    this.#cache = cache;
  }

  get node(): NodeRef | undefined {
    return this.#node;
  }

  /** The Node as last seen; true when it changed (every pod's node file changes). */
  setNode(node: NodeRef | undefined): boolean {
    if (node?.name === this.#node?.name && node?.uid === this.#node?.uid) return false;
    this.#node = node;
    return true;
  }

  /** The context for one pod's projection; records the owners its chain went through. */
  contextFor(uid: string, namespace: string, owners: readonly OwnerReference[] | null | undefined, s: NodeSettings): ProjectionContext {
    if (!s.followOwners || !this.#cache) {
      this.forget(uid);
      return { node: this.#node };
    }
    const cache = this.#cache;
    const w = walkChain(namespace, owners, (ns, ref) => cache.lookup(ns, ref));
    this.#record(uid, w.through);
    return { node: this.#node, chain: w.chain };
  }

  /** Pods whose chain passed through this owner. */
  dependentsOf(ownerUid: string): string[] {
    return [...this.#dependents.get(ownerUid) ?? []];
  }

  hasDependents(ownerUid: string): boolean {
    return (this.#dependents.get(ownerUid)?.size ?? 0) > 0;
  }

  forget(uid: string): void {
    this.#record(uid, []);
  }

  #record(uid: string, through: readonly string[]): void {
    for (const o of this.#through.get(uid) ?? []) {
      const set = this.#dependents.get(o);
      set?.delete(uid);
      if (set?.size === 0) this.#dependents.delete(o);
    }
    if (through.length === 0) {
      this.#through.delete(uid);
      return;
    }
    this.#through.set(uid, through);
    for (const o of through) {
      let set = this.#dependents.get(o);
      if (!set) this.#dependents.set(o, (set = new Set()));
      set.add(uid);
    }
  }
}
