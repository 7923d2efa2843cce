// The metadata of pods' owners (ReplicaSets, Jobs, ...), read once per owner per node and
// shared by every pod that has it: what following controller chains costs the API server.
//
//   lookup    synchronous: the cached answer, or Pending while the one GET for that owner
//             is queued or in flight. Keyed by the reference whole (UID, namespace, kind,
//             name): pod authors write references, and two that share a UID under other
//             names are two owners to read, not one entry to flip between.
//   queue     at most MAX_IN_FLIGHT GETs at once; the others wait their turn (a node's first
//             start may meet hundreds of owners, and plain requests share a few sockets).
//   GET       metadata only (PartialObjectMetadata: no spec, no status, never a Secret's
//             data), from the API server's watch cache (resourceVersion=0), for kinds on the
//             allow-list only, each of which the agent may `get` by its own ClusterRole
//             (rbac-follow-owners.yaml). 404 with a name: NotFound; without: NotServed; 403:
//             Forbidden; an answer without metadata or any other failure: Unavailable,
//             retried on its own timer after RETRY_MS, doubling to RETRY_MAX_MS, jittered.
//   refresh   an entry still in use (a tracked pod's chain passes through it, or it was looked
//             up lately) is read again REFRESH after its last read (a sweep every quarter of
//             it): an owner's own change of owner reaches the files within 1.25x the bound.
//             An entry out of use for two bounds is dropped.
//   changed   called with the owner's UID when an answer differs from the one before; the
//             reconciler renders the pods whose chain passes through it again. Also when an
//             entry is dropped before its answer (past maxEntries): its waiters look again.

import type { Logger } from 'pino';
import type { ChainEnd, OwnerReference } from '../../projections/index.ts';
import { Backoff, type Clock } from '../common/clock.ts';
import { ConfigError } from '../common/errors.ts';
import { F } from '../monitoring/logfields.ts';
import { ApiError, type ApiClient } from '../kube/client.ts';
import { WORKLOAD_KINDS } from '../../projections/workloadkinds.ts';

export interface FollowedKind {
  group: string;
  version: string;
  kind: string;
  /** The resource's plural name, as in the URL. */
  resource: string;
}

/** The built-in workload kinds: the default allow-list. */
export const BUILTIN_KINDS: readonly FollowedKind[] = WORKLOAD_KINDS.filter((w) => w.owner)
  .map(({ group, version, kind, resource }) => ({ group, version, kind, resource }));

/** `group/version/Kind=resource`, comma-separated (e.g. argoproj.io/v1alpha1/Rollout=rollouts). */
export function parseFollowKinds(flag: string): FollowedKind[] {
  if (flag.trim() === '') return [];
  return flag.split(',').map((item) => {
    const m = /^([a-z0-9.-]*)\/([a-z0-9]+)\/([A-Z][A-Za-z0-9]*)=([a-z0-9]([-a-z0-9]*[a-z0-9])?)$/.exec(item.trim());
    if (!m) throw new ConfigError(`--follow-kinds: ${JSON.stringify(item)} is not group/version/Kind=resource (e.g. argoproj.io/v1alpha1/Rollout=rollouts)`);
    return { group: m[1]!, version: m[2]!, kind: m[3]!, resource: m[4]! };
  });
}

export type OwnerLookup =
  | { state: 'ok'; ownerReferences: readonly OwnerReference[] }
  | { state: 'pending' }
  | { state: 'error'; reason: ChainEnd; message: string };

interface Entry {
  key: string;
  namespace: string;
  ref: OwnerReference;
  kind: FollowedKind;
  answer: OwnerLookup;
  fetchedAt: number;
  usedAt: number;
  /** Queued or in flight. */
  inFlight: boolean;
  /** Set after an Unavailable answer: the retry's delays, and the timer of the next. */
  retry?: { backoff: Backoff; cancel: () => void };
}

export const RETRY_MS = 5_000;
export const RETRY_MAX_MS = 60_000;
/** Owner GETs in flight at once, of the client's 8 plain sockets: Events and relists keep the rest. */
export const MAX_IN_FLIGHT = 6;
const PARTIAL_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

export interface OwnerMetadataOptions {
  client: ApiClient;
  kinds: readonly FollowedKind[];
  refreshMs: number;
  clock: Clock;
  log: Logger;
  changed(ownerUid: string): void;
  /** Each GET, by kind, outcome and why: `new` (first sight of the owner on this node) or `refresh`. */
  observe?(kind: string, outcome: string, why: 'new' | 'refresh'): void;
  /** A kind the agent may not read: the operator must act (an Event on the Node). */
  forbidden?(kind: string, message: string): void;
  /** True while some tracked pod's chain passes through the owner (kept and refreshed even if not looked up since). */
  inUse?(ownerUid: string): boolean;
  /** Jitter of the retries; default Math.random. */
  random?: () => number;
  /** Owners held at most; past it, the least lately looked up is dropped (default: no bound, as on a node). */
  maxEntries?: number;
}

export class OwnerMetadataCache {
  readonly #o: OwnerMetadataOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #kinds: Map<string, FollowedKind>;
  /** Kinds met but not followed, logged once each: the operator may want --follow-kinds. */
  readonly #unfollowed = new Set<string>();
  #cancelSweep: (() => void) | undefined;
  #closed = false;
  #running = 0;
  readonly #waiting: Entry[] = [];

  constructor(opts: OwnerMetadataOptions) {
    this.#o = opts;
    this.#kinds = new Map(opts.kinds.map((k) => [`${k.group ? `${k.group}/` : ''}${k.version}/${k.kind}`, k]));
    this.#schedule();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The owner's metadata as last read; Pending (and one GET started) on first sight. */
  lookup(namespace: string, ref: OwnerReference): OwnerLookup {
    const kind = this.#kinds.get(`${ref.apiVersion}/${ref.kind}`);
    if (!kind) {
      const key = `${ref.apiVersion}/${ref.kind}`;
      if (!this.#unfollowed.has(key) && this.#unfollowed.size < 100) {
        this.#unfollowed.add(key);
        this.#o.log.info({ [F.kind]: ref.kind, apiVersion: ref.apiVersion }, 'an owner kind not on the list to follow ends chains here; add it with --follow-kinds (and its get to rbac-follow-owners.yaml) to follow it');
      }
      return { state: 'error', reason: 'KindNotFollowed', message: `${ref.kind} (${ref.apiVersion}) is not on this node's list of kinds to follow (--follow-kinds)` };
    }
    const now = this.#o.clock.now();
    const key = `${ref.uid}\n${namespace}\n${ref.apiVersion}/${ref.kind}\n${ref.name}`;
    let e = this.#entries.get(key);
    if (!e) {
      e = { key, namespace, ref, kind, answer: { state: 'pending' }, fetchedAt: 0, usedAt: now, inFlight: false };
      this.#entries.set(key, e);
      this.#evict();
      this.#fetch(e);
    } else if (this.#o.maxEntries !== undefined) {
      // Map order is the eviction order: a lookup moves the entry to the end.
      this.#entries.delete(key);
      this.#entries.set(key, e);
    }
    e.usedAt = now;
    return e.answer;
  }

  /** Past maxEntries, the entries looked up least lately go. */
  #evict(): void {
    const max = this.#o.maxEntries;
    if (max === undefined) return;
    for (const [key, e] of this.#entries) {
      if (this.#entries.size <= max) break;
      e.retry?.cancel();
      this.#entries.delete(key);
    }
  }

  close(): void {
    this.#closed = true;
    this.#cancelSweep?.();
    for (const e of this.#entries.values()) e.retry?.cancel();
    this.#waiting.length = 0;
  }

  #schedule(): void {
    this.#cancelSweep = this.#o.clock.setTimer(() => {
      this.#sweep();
      if (!this.#closed) this.#schedule();
    }, Math.max(1_000, this.#o.refreshMs / 4));
  }

  /** Refresh what is due and in use; drop what nobody used for two bounds. */
  #sweep(): void {
    const now = this.#o.clock.now();
    for (const [key, e] of this.#entries) {
      if (this.#o.inUse?.(e.ref.uid)) e.usedAt = now;
      if (now - e.usedAt > 2 * this.#o.refreshMs) {
        e.retry?.cancel();
        this.#entries.delete(key);
      } else if (!e.inFlight && !e.retry && now - e.fetchedAt >= this.#o.refreshMs) this.#fetch(e);
    }
  }

  /** Queue a GET of the owner; it starts at once while fewer than MAX_IN_FLIGHT run. */
  #fetch(e: Entry): void {
    e.inFlight = true;
    if (this.#running < MAX_IN_FLIGHT) this.#start(e);
    else this.#waiting.push(e);
  }

  #next(): void {
    this.#running--;
    while (this.#running < MAX_IN_FLIGHT && this.#waiting.length > 0) {
      const e = this.#waiting.shift()!;
      if (this.#entries.get(e.key) === e && !this.#closed) this.#start(e);
      else {
        e.inFlight = false;
        this.#dropped(e);
      }
    }
  }

  /**
   * An entry dropped (evicted past maxEntries) before its answer came: told as a change, so
   * that whoever waits for that owner looks again now instead of sleeping out its budget.
   */
  #dropped(e: Entry): void {
    if (this.#closed) return;
    try {
      this.#o.changed(e.ref.uid);
    } catch (err) {
      this.#o.log.error({ [F.err]: err }, 'handling a dropped owner failed');
    }
  }

  #start(e: Entry): void {
    this.#running++;
    const why = e.fetchedAt === 0 ? 'new' : 'refresh';
    const k = e.kind;
    const base = k.group ? `/apis/${k.group}/${k.version}` : `/api/${k.version}`;
    const path = `${base}/namespaces/${encodeURIComponent(e.namespace)}/${k.resource}/${encodeURIComponent(e.ref.name)}?resourceVersion=0`;
    this.#o.client.json<unknown>('GET', path, undefined, undefined, PARTIAL_METADATA).then(
      (obj) => {
        const meta = typeof obj === 'object' && obj !== null && 'metadata' in obj && typeof obj.metadata === 'object' && obj.metadata !== null
          ? obj.metadata as { uid?: unknown; ownerReferences?: unknown } : undefined;
        if (!meta) {
          this.#settle(e, { state: 'error', reason: 'Unavailable', message: `reading ${k.kind} ${e.namespace}/${e.ref.name} gave an answer without metadata` }, 'error', why);
          return;
        }
        this.#settle(e, meta.uid === e.ref.uid
          ? { state: 'ok', ownerReferences: Array.isArray(meta.ownerReferences) ? meta.ownerReferences as OwnerReference[] : [] }
          : { state: 'error', reason: 'UIDMismatch', message: `${k.kind} ${e.namespace}/${e.ref.name} is another object than UID ${e.ref.uid}: the owner the reference names is gone` }, 'ok', why);
      },
      (err: unknown) => {
        const status = err instanceof ApiError ? err.status : 0;
        const what = `${k.kind} ${e.namespace}/${e.ref.name}`;
        if (status === 404 && (err as ApiError).detailsName !== undefined) {
          this.#settle(e, { state: 'error', reason: 'NotFound', message: `${what} does not exist (deleted: the garbage collector acts on its dependents)` }, '404', why);
        } else if (status === 404) {
          this.#settle(e, { state: 'error', reason: 'NotServed', message: `the API server does not serve ${k.resource}.${k.group || 'core'}/${k.version}` }, '404', why);
        } else if (status === 403) {
          const message = `the agent may not get ${k.resource}.${k.group || 'core'}: apply rbac-follow-owners.yaml (or add the kind to it)`;
          this.#settle(e, { state: 'error', reason: 'Forbidden', message }, '403', why);
          this.#o.forbidden?.(k.kind, message);
        } else {
          this.#o.log.warn({ [F.err]: String(err), [F.resource]: k.resource }, 'reading an owner failed; retrying');
          this.#settle(e, { state: 'error', reason: 'Unavailable', message: `reading ${what} failed: ${String(err)}` }, status ? String(status) : 'error', why);
        }
      },
    ).catch((err: unknown) => {
      // A bug past the answer (in changed(), say) must not become an unhandled rejection.
      this.#o.log.error({ [F.err]: err }, 'handling an owner\'s answer failed');
    }).finally(() => this.#next());
  }

  #settle(e: Entry, answer: OwnerLookup, outcome: string, why: 'new' | 'refresh'): void {
    e.inFlight = false;
    e.fetchedAt = Math.max(1, this.#o.clock.now());
    this.#o.observe?.(e.kind.kind, outcome, why);
    if (this.#closed) return;
    if (this.#entries.get(e.key) !== e) return this.#dropped(e);
    this.#retryIfUnavailable(e, answer);
    const before = JSON.stringify(e.answer);
    e.answer = answer;
    if (JSON.stringify(answer) !== before) this.#o.changed(e.ref.uid);
  }

  /** Unavailable: read again on the entry's own timer (RETRY_MS doubling, jittered), not at the next sweep. */
  #retryIfUnavailable(e: Entry, answer: OwnerLookup): void {
    e.retry?.cancel();
    if (answer.state !== 'error' || answer.reason !== 'Unavailable') {
      e.retry = undefined;
      return;
    }
    const backoff = e.retry?.backoff ?? new Backoff({ initialMs: RETRY_MS, maxMs: RETRY_MAX_MS, random: this.#o.random ?? Math.random });
    const cancel = this.#o.clock.setTimer(() => {
      if (this.#closed || this.#entries.get(e.key) !== e || e.inFlight) return;
      this.#fetch(e);
    }, backoff.next());
    e.retry = { backoff, cancel };
  }
}
