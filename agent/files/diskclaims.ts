// Which pod may use which directory under <kubelet>/pods.
//
// An ordinary pod's directory is its metadata.uid. A static pod's mirror pod names its
// directory in the kubernetes.io/config.mirror annotation, and the API server lets any
// pod author set that annotation. So a mirror value is believed only when it names no
// other pod on this node (else a pod could redirect our writes into a victim's volume)
// and no other pod claims the same value (a real static pod has exactly one mirror pod).

export class DiskClaims {
  /** API uid of every pod on this node, opted in or not. */
  readonly #pods = new Set<string>();
  /** mirror value -> API uids of the pods that claim it. */
  readonly #claims = new Map<string, Set<string>>();
  /** API uid -> the mirror value it claims. */
  readonly #mirrorOf = new Map<string, string>();

  /**
   * Record that pod `uid` is on the node and claims `mirror` (or nothing). Returns the
   * other pods whose verdict may have changed and must be looked at again.
   */
  see(uid: string, mirror: string | undefined): string[] {
    const affected = new Set(this.#claims.get(uid) ?? []); // pods that claimed this pod's uid
    this.#pods.add(uid);
    const before = this.#mirrorOf.get(uid);
    if (before !== mirror) {
      if (before !== undefined) this.#unclaim(uid, before, affected);
      if (mirror !== undefined) {
        for (const other of this.#claims.get(mirror) ?? []) affected.add(other);
        let set = this.#claims.get(mirror);
        if (!set) this.#claims.set(mirror, (set = new Set()));
        set.add(uid);
        this.#mirrorOf.set(uid, mirror);
      }
    }
    affected.delete(uid);
    return [...affected];
  }

  /** Pod `uid` left the node. Returns the pods whose verdict may have changed. */
  forget(uid: string): string[] {
    const affected = new Set(this.#claims.get(uid) ?? []);
    this.#pods.delete(uid);
    const mirror = this.#mirrorOf.get(uid);
    if (mirror !== undefined) this.#unclaim(uid, mirror, affected);
    affected.delete(uid);
    return [...affected];
  }

  /** Every pod on the node, by API uid. */
  pods(): string[] {
    return [...this.#pods];
  }

  /** Why pod `uid` may not use directory `disk`, or undefined if it may. */
  refusal(uid: string, disk: string): string | undefined {
    if (disk === uid) return undefined;
    if (this.#pods.has(disk)) return 'is the UID of another pod on this node';
    const claimants = this.#claims.get(disk)?.size ?? 0;
    if (claimants > 1) return `is also claimed by ${claimants - 1} other pod(s) on this node`;
    return undefined;
  }

  #unclaim(uid: string, mirror: string, affected: Set<string>): void {
    const set = this.#claims.get(mirror);
    set?.delete(uid);
    for (const other of set ?? []) affected.add(other);
    if (set?.size === 0) this.#claims.delete(mirror);
    this.#mirrorOf.delete(uid);
  }
}
