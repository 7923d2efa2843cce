// The metadata of pods' owners (ReplicaSets, Jobs, ...), read once per owner per node and
// shared by every pod that has it: what following controller chains costs the API server.
//
//   lookup    synchronous: the cached answer, or Pending while the one GET for that owner
//             is in flight. Keyed by the owner's UID.
//   GET       metadata only (PartialObjectMetadata: no spec, no status, never a Secret's
//             data), from the API server's watch cache (resourceVersion=0), for kinds on the
//             allow-list only, each of which the agent may `get` by its own ClusterRole
//             (rbac-follow-owners.yaml). 404 with a name: NotFound; without: NotServed; 403:
//             Forbidden; other failures: Unavailable, retried after RETRY_MS.
//   refresh   an entry still in use (a tracked pod's chain passes through it, or it was looked
//             up lately) is read again REFRESH after its last read (a sweep every quarter of
//             it): an owner's own change of owner reaches the files within 1.25x the bound.
//             An entry out of use for two bounds is dropped.
//   changed   called with the owner's UID when an answer differs from the one before; the
//             reconciler renders the pods whose chain passes through it again.

import type { Logger } from 'pino';
import type { ChainEnd, OwnerReference } from '../../projections/index.ts';
import type { Clock } from '../common/clock.ts';
import { F } from '../monitoring/logfields.ts';
import { ApiError, type ApiClient } from './client.ts';

export interface FollowedKind {
  group: string;
  version: string;
  kind: string;
  /** The resource's plural name, as in the URL. */
  resource: string;
}

/** The built-in workload kinds: the default allow-list. */
export const BUILTIN_KINDS: readonly FollowedKind[] = [
  { group: 'apps', version: 'v1', kind: 'ReplicaSet', resource: 'replicasets' },
  { group: 'apps', version: 'v1', kind: 'Deployment', resource: 'deployments' },
  { group: 'apps', version: 'v1', kind: 'StatefulSet', resource: 'statefulsets' },
  { group: 'apps', version: 'v1', kind: 'DaemonSet', resource: 'daemonsets' },
  { group: 'batch', version: 'v1', kind: 'Job', resource: 'jobs' },
  { group: 'batch', version: 'v1', kind: 'CronJob', resource: 'cronjobs' },
  { group: '', version: 'v1', kind: 'ReplicationController', resource: 'replicationcontrollers' },
];

/** `group/version/Kind=resource`, comma-separated (e.g. argoproj.io/v1alpha1/Rollout=rollouts). */
export function parseFollowKinds(flag: string): FollowedKind[] {
  if (flag.trim() === '') return [];
  return flag.split(',').map((item) => {
    const m = /^([a-z0-9.-]*)\/([a-z0-9]+)\/([A-Z][A-Za-z0-9]*)=([a-z0-9]([-a-z0-9]*[a-z0-9])?)$/.exec(item.trim());
    if (!m) throw new Error(`--follow-kinds: ${JSON.stringify(item)} is not group/version/Kind=resource (e.g. argoproj.io/v1alpha1/Rollout=rollouts)`);
    return { group: m[1]!, version: m[2]!, kind: m[3]!, resource: m[4]! };
  });
}

export type OwnerLookup =
  | { state: 'ok'; ownerReferences: readonly OwnerReference[] }
  | { state: 'pending' }
  | { state: 'error'; reason: ChainEnd; message: string };

interface Entry {
  namespace: string;
  ref: OwnerReference;
  kind: FollowedKind;
  answer: OwnerLookup;
  fetchedAt: number;
  usedAt: number;
  inFlight: boolean;
}

export const RETRY_MS = 5_000;
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
}

export class OwnerMetadataCache {
  readonly #o: OwnerMetadataOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #kinds: Map<string, FollowedKind>;
  /** Kinds met but not followed, logged once each: the operator may want --follow-kinds. */
  readonly #unfollowed = new Set<string>();
  #cancelSweep: (() => void) | undefined;
  #closed = false;

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
    let e = this.#entries.get(ref.uid);
    if (!e || e.namespace !== namespace || e.ref.name !== ref.name || e.kind !== kind) {
      e = { namespace, ref, kind, answer: { state: 'pending' }, fetchedAt: 0, usedAt: now, inFlight: false };
      this.#entries.set(ref.uid, e);
      this.#fetch(e);
    }
    e.usedAt = now;
    return e.answer;
  }

  close(): void {
    this.#closed = true;
    this.#cancelSweep?.();
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
    for (const [uid, e] of this.#entries) {
      if (this.#o.inUse?.(uid)) e.usedAt = now;
      if (now - e.usedAt > 2 * this.#o.refreshMs) this.#entries.delete(uid);
      else if (!e.inFlight && now - e.fetchedAt >= (e.answer.state === 'error' && e.answer.reason === 'Unavailable' ? RETRY_MS : this.#o.refreshMs)) this.#fetch(e);
    }
  }

  #fetch(e: Entry): void {
    const why = e.fetchedAt === 0 ? 'new' : 'refresh';
    e.inFlight = true;
    const k = e.kind;
    const base = k.group ? `/apis/${k.group}/${k.version}` : `/api/${k.version}`;
    const path = `${base}/namespaces/${encodeURIComponent(e.namespace)}/${k.resource}/${encodeURIComponent(e.ref.name)}?resourceVersion=0`;
    this.#o.client.json<{ metadata?: { uid?: string; ownerReferences?: OwnerReference[] } }>('GET', path, undefined, undefined, PARTIAL_METADATA).then(
      (obj) => {
        const uid = obj.metadata?.uid ?? '';
        this.#settle(e, uid === e.ref.uid
          ? { state: 'ok', ownerReferences: obj.metadata?.ownerReferences ?? [] }
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
    );
  }

  #settle(e: Entry, answer: OwnerLookup, outcome: string, why: 'new' | 'refresh'): void {
    e.inFlight = false;
    e.fetchedAt = Math.max(1, this.#o.clock.now());
    this.#o.observe?.(e.kind.kind, outcome, why);
    if (this.#closed || this.#entries.get(e.ref.uid) !== e) return;
    const before = JSON.stringify(e.answer);
    e.answer = answer;
    if (JSON.stringify(answer) !== before) this.#o.changed(e.ref.uid);
  }
}
