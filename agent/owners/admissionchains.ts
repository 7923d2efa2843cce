// The controller chains admission writes (the webhook, and the gate's lifter in policy mode) into a pod's annotations at its admission, so that
// the workload's identity is right at the first container start. Owners' metadata comes from
// the agent's own OwnerMetadataCache (owners/ownermeta.ts): metadata-only reads from the API
// server's watch cache, each owner read once and shared by every pod that has it, at most
// `maxOwners` of them held (the least lately used goes first), read again while in use.
//
// A walk that meets an owner not read yet waits for it, but never past the admission's
// budget: then the chain says Pending, the pod is admitted with what is known, and the agent
// on the pod's node fills the rest in. Reads that fail end the chain with their reason
// (Forbidden, NotFound, ...), never with a guess.

import type { Logger } from 'pino';
import type { ControllerChain, OwnerReference } from '../../projections/index.ts';
import { realClock, type Clock } from '../common/clock.ts';
import type { ApiClient } from '../kube/client.ts';
import { BUILTIN_KINDS, OwnerMetadataCache, type FollowedKind } from './ownermeta.ts';
import { walkChain } from './chain.ts';

export interface AdmissionChainsOptions {
  client: ApiClient;
  log: Logger;
  /** How long one admission may wait for owner reads in all. */
  budgetMs: number;
  /** Kinds followed beyond the built-in workloads (--follow-kinds). */
  followKinds?: readonly FollowedKind[];
  /** An owner in use is read again this long after its last read. */
  refreshMs: number;
  maxOwners: number;
  clock?: Clock;
  /** Each GET, by kind and outcome (metrics). */
  observe?(kind: string, outcome: string): void;
}

export class AdmissionChains {
  readonly #cache: OwnerMetadataCache;
  readonly #budgetMs: number;
  readonly #clock: Clock;
  /** Walks waiting for an owner's answer, by the owner's UID. */
  readonly #waiting = new Map<string, Set<() => void>>();

  constructor(o: AdmissionChainsOptions) {
    this.#budgetMs = o.budgetMs;
    this.#clock = o.clock ?? realClock;
    this.#cache = new OwnerMetadataCache({
      client: o.client, kinds: [...BUILTIN_KINDS, ...o.followKinds ?? []], refreshMs: o.refreshMs, clock: this.#clock, log: o.log,
      maxEntries: o.maxOwners,
      changed: (uid) => {
        for (const wake of this.#waiting.get(uid) ?? []) wake();
        this.#waiting.delete(uid);
      },
      observe: (kind, outcome) => o.observe?.(kind, outcome),
    });
  }

  /** The pod's chain, as far as its owners could be read within the budget. */
  async resolve(namespace: string, owners: readonly OwnerReference[]): Promise<ControllerChain> {
    const deadline = this.#clock.now() + this.#budgetMs;
    for (;;) {
      const w = walkChain(namespace, owners, (ns, ref) => this.#cache.lookup(ns, ref));
      const left = deadline - this.#clock.now();
      if (w.chain.end.reason !== 'Pending' || left <= 0) return w.chain;
      await this.#answerOf(w.through.at(-1)!, left);
    }
  }

  /** Resolves when the owner's answer arrives, or after `ms`. */
  #answerOf(uid: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.#waiting.get(uid);
      if (!set) this.#waiting.set(uid, (set = new Set()));
      const done = () => {
        cancel();
        set!.delete(done);
        // An emptied set goes too: admissions of ever new owners must not grow the map for good.
        if (set!.size === 0 && this.#waiting.get(uid) === set) this.#waiting.delete(uid);
        resolve();
      };
      const cancel = this.#clock.setTimer(done, ms);
      set.add(done);
    });
  }

  get owners(): number {
    return this.#cache.size;
  }

  /** Owners some admission waits for now (at most one per admission in flight). */
  get waiting(): number {
    return this.#waiting.size;
  }

  close(): void {
    this.#cache.close();
    for (const set of this.#waiting.values()) for (const wake of set) wake();
    this.#waiting.clear();
  }
}
