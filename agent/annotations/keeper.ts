// AnnotationKeeper: keeps the ownerrefs.dev annotations that a pod's spec reads (the KEP's
// syntax, rewritten by the webhook: projections/annotations.ts) equal to what the agent
// computes from the pod as watched. The kubelet renders them into the pod's volumes and
// env. The webhook sets them at admission, so a pod costs no request here until its owners
// change (or, for the Node's annotation, until it is bound).
//
//   1. A pod event: which of our annotations its spec reads, and the changes they need
//      (annotationChanges: against the values the event carries, so the echo of the agent's
//      own write needs none). Ours it carries but does not read are removed: no admission
//      wrote them (a pod admitted where no webhook or policy ran). A pod that reads none and
//      carries none is forgotten. A pod being deleted, or finished, needs none: the kubelet
//      renders nothing for it any more.
//   2. A pod with changes is queued (one run per pod at a time). A run takes a token from the
//      node's write budget (--annotation-qps), else waits for one.
//   3. One merge PATCH of the changed annotations alone, with the pod's uid and the
//      resourceVersion of the view they were computed from as preconditions: a value is never
//      computed from one version and written over a newer one.
//   4. 429 (API Priority and Fairness: the agents' level is full): the node's whole write
//      budget waits the server's Retry-After (at least THROTTLED_RETRY_MS, doubled per 429 in
//      a row on the node, jittered), then refills from empty, and the pod is retried then, its
//      own backoff not grown: a fleet backs off as one client per node, and its rejected
//      requests fall to about what the level serves.
//      409 (the pod changed since): run again at once from the newer version, the watch's
//      or, when none has come, one GET's; the precondition keeps an older view from winning.
//      404: the pod is gone. Any other 4xx (RBAC, an admission policy or webhook, Kyverno's
//      400s, 422 for a value the pod's annotations cannot fit) is a refusal: a Warning Event on
//      the pod, a log line, a refusal counted by who refused, and a retry with backoff. The pod
//      stays kept: it is never forgotten for a failure.
//   5. A 2xx whose stored value is not the value sent (a mutating webhook put another back)
//      is a write that did not stick, reported as a refusal is and retried.
//   A value in place is never removed or blanked here.

import type { Logger } from 'pino';
import { annotationChanges, annotationsRead, CHAIN_KEYS } from '../../projections/annotations.ts';
import type { NodeRef } from '../../projections/chain.ts';
import { realClock, type Clock } from '../common/clock.ts';
import { ANNOTATION_BURST_FACTOR, ANNOTATION_CONCURRENCY, ANNOTATION_QPS, THROTTLED_DOUBLINGS, THROTTLED_RETRY_MS } from '../common/defaults.ts';
import { TokenBucket } from '../common/ratelimit.ts';
import { ApiError, type ApiClient } from '../kube/client.ts';
import { refusalOf, type Refusal } from './refusal.ts';
import type { EventSink, InvolvedObject } from '../kube/events.ts';
import { DEFAULT_SETTINGS, type NodeSettings } from '../node/nodeconfig.ts';
import type { OwnerMetadataCache } from '../owners/ownermeta.ts';
import type { ReflectorHandler } from '../kube/reflectorcontract.ts';
import { F } from '../monitoring/logfields.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import { OwnerFollowing } from '../owners/following.ts';

import { WorkQueue } from '../common/queue.ts';
import { ANNOTATION_KEYS, type AnnotationKey } from '../../projections/names.ts';
import { slimView, type PodView } from '../node/podview.ts';

export const REASON_ANNOTATION_FAILED = 'OwnerRefsAnnotationFailed';

export interface AnnotationKeeperOptions {
  client: Pick<ApiClient, 'json'>;
  events: EventSink;
  log: Logger;
  metrics: Pick<AgentMetrics, 'annotationWrites' | 'annotationRefusals' | 'annotationPods' | 'annotationLatency'>;
  /** Owners' metadata, for the pods that read the chain (absent: the chain's annotations are left as admission set them). */
  owners?: Pick<OwnerMetadataCache, 'lookup'>;
  clock?: Clock;
  /** PATCHes per second on this node (the burst is ANNOTATION_BURST_FACTOR times this). */
  qps?: number;
  /** 0 ≤ x < 1, for the jitter of a throttled wait (default Math.random). */
  random?: () => number;
}

/** What the keeper holds of one pod that reads our annotations. */
interface Kept {
  ref: InvolvedObject;
  view: PodView;
  keys: readonly AnnotationKey[];
  /** When the changes now pending were first seen (the latency metric starts here). */
  since: number | undefined;
  /**
   * The last write answered 2xx but did not stick: the watch event of what was stored is the
   * mutator's doing, not news, and must not cut the retry's backoff short (no PATCH loop).
   */
  overridden: boolean;
}

export class AnnotationKeeper implements ReflectorHandler<PodView> {
  readonly #o: AnnotationKeeperOptions & { clock: Clock; random: () => number };
  readonly #pods = new Map<string, Kept>();
  readonly #queue: WorkQueue;
  readonly #budget: TokenBucket;
  /** 429s in a row on this node: each doubles the next hold, so a fleet's retries fall to what the level serves. */
  #throttledInARow = 0;
  /** When the last hold began: a 429 for a PATCH sent before it is the same refusal, not another in a row. */
  #heldAt = -Infinity;
  readonly #following: OwnerFollowing;
  #settings: NodeSettings = DEFAULT_SETTINGS;

  constructor(opts: AnnotationKeeperOptions) {
    this.#o = { clock: realClock, random: Math.random, ...opts };
    const qps = opts.qps ?? ANNOTATION_QPS;
    this.#budget = new TokenBucket({ burst: Math.max(1, Math.round(qps * ANNOTATION_BURST_FACTOR)), refillMs: 1_000 / qps, clock: this.#o.clock });
    this.#queue = new WorkQueue({ concurrency: ANNOTATION_CONCURRENCY, process: (uid) => this.#process(uid), clock: this.#o.clock });
    this.#following = new OwnerFollowing(opts.owners);
  }

  replace(items: PodView[]): void {
    const seen = new Set(items.map((p) => p.metadata?.uid));
    for (const uid of [...this.#pods.keys()]) if (!seen.has(uid)) this.#forget(uid);
    for (const pod of items) this.upsert(pod);
  }

  upsert(pod: PodView): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const keys = annotationsRead(pod.spec);
    if (keys.length === 0 && unread(pod, keys).length === 0) return this.#forget(uid);
    const had = this.#pods.get(uid);
    const ref: InvolvedObject = { kind: 'Pod', name: pod.metadata?.name ?? '', namespace: pod.metadata?.namespace, uid };
    const kept: Kept = { ref, view: pod, keys, since: had?.since, overridden: had?.overridden ?? false };
    this.#pods.set(uid, kept);
    if (!had) this.#o.metrics.annotationPods.set(this.#pods.size);
    if (this.#changes(uid, kept).size === 0) {
      kept.since = undefined;
      this.#queue.forget(uid);
      return;
    }
    kept.since ??= this.#o.clock.now();
    if (kept.overridden) this.#queue.addIfIdle(uid);
    else this.#queue.add(uid);
  }

  remove(pod: PodView): void {
    if (pod.metadata?.uid) this.#forget(pod.metadata.uid);
  }

  /** Node labels: pausing stops writes. */
  setSettings(next: NodeSettings): void {
    const prev = this.#settings;
    this.#settings = next;
    if (prev.paused !== next.paused) this.#revisitAll();
  }

  /** This node's name and UID: pods reading the Node's annotation are looked at again when they change. */
  setNode(node: NodeRef | undefined): void {
    if (this.#following.setNode(node)) this.#revisitAll();
  }

  /** An owner's metadata changed (or was first read): the pods whose chain passes through it. */
  ownerChanged(ownerUid: string): void {
    for (const uid of this.#following.dependentsOf(ownerUid)) {
      const kept = this.#pods.get(uid);
      if (kept) this.upsert(kept.view);
    }
  }

  ownerInUse(ownerUid: string): boolean {
    return this.#following.hasDependents(ownerUid);
  }

  /** Resolves when no PATCH is queued or running (delayed retries do not count). */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  /** In-flight PATCHes finish; nothing new starts. */
  close(): Promise<void> {
    return this.#queue.drain();
  }

  #revisitAll(): void {
    for (const kept of [...this.#pods.values()]) this.upsert(kept.view);
  }

  #forget(uid: string): void {
    if (!this.#pods.delete(uid)) return;
    this.#following.forget(uid);
    this.#queue.forget(uid);
    this.#o.metrics.annotationPods.set(this.#pods.size);
  }

  /** Step 1: what the pod's annotations need, from its newest view (null: remove the key). */
  #changes(uid: string, kept: Kept): Map<AnnotationKey, string | null> {
    const pod = kept.view;
    if (this.#settings.paused || pod.metadata?.deletionTimestamp || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return new Map();
    const owners = pod.metadata?.ownerReferences ?? [];
    // The chain is walked for pods that read it, on every node: the pod asked for it, and the
    // webhook's value from admission is kept current only here. (The node label
    // ownerrefs.dev/follow-owners is the files' opt-in, for every opted-in pod of the node.)
    const readsChain = kept.keys.some((k) => CHAIN_KEYS.has(k));
    if (!readsChain) this.#following.forget(uid);
    const ctx = readsChain ? this.#following.contextFor(uid, pod.metadata?.namespace ?? '', owners, { ...this.#settings, followOwners: true }) : { node: this.#following.node };
    const changes: Map<AnnotationKey, string | null> = annotationChanges(kept.keys, owners, ctx, pod.metadata?.annotations);
    for (const key of unread(pod, kept.keys)) changes.set(key, null);
    return changes;
  }

  /** Steps 2-4. */
  async #process(uid: string): Promise<void> {
    const kept = this.#pods.get(uid);
    if (!kept) return;
    const changes = this.#changes(uid, kept);
    if (changes.size === 0) return void this.#queue.forget(uid);
    const wait = this.#budget.take();
    if (wait > 0) return void this.#queue.addAfter(uid, wait);
    const meta = kept.view.metadata!;
    const sentAt = this.#o.clock.now();
    const body = { metadata: { uid, resourceVersion: meta.resourceVersion, annotations: Object.fromEntries(changes) } };
    const path = `/api/v1/namespaces/${encodeURIComponent(meta.namespace ?? '')}/pods/${encodeURIComponent(meta.name ?? '')}`;
    let stored: unknown;
    try {
      stored = await this.#o.client.json('PATCH', path, body, 'application/merge-patch+json');
    } catch (err) {
      return this.#failed(uid, kept, changes, path, sentAt, err);
    }
    this.#throttledInARow = 0;
    const notKept = notStored(changes, stored);
    const current = this.#pods.get(uid);
    if (current) current.overridden = notKept.length > 0;
    if (notKept.length > 0) {
      this.#o.metrics.annotationWrites.inc({ result: 'overridden' });
      const shown = (v: string | undefined) => (v === undefined ? 'none' : JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v));
      const message = `could not keep ${notKept.map(([k, v]) => `${k} (stored ${shown(v)})`).join(', ')}: the API server answered the agent's PATCH but stored other values; ` +
        'a mutating admission webhook or policy changed the update: exempt the agent\'s ServiceAccount in it';
      this.#refused(kept, { by: 'mutating admission', reason: '' }, message);
      return void this.#queue.retry(uid);
    }
    this.#o.metrics.annotationWrites.inc({ result: 'ok' });
    if (kept.since !== undefined && this.#pods.get(uid) === kept) this.#o.metrics.annotationLatency.observe((this.#o.clock.now() - kept.since) / 1000);
    this.#queue.forget(uid);
  }

  /** Step 4: what a failed PATCH leads to, by its status. */
  async #failed(uid: string, kept: Kept, changes: Map<AnnotationKey, string | null>, path: string, sentAt: number, err: unknown): Promise<void> {
    const status = err instanceof ApiError ? err.status : 0;
    const result = status === 409 ? 'conflict' : status === 404 ? 'notfound' : status === 403 ? 'forbidden' : status === 422 ? 'invalid' : status === 429 ? 'throttled'
      : status >= 400 && status < 500 ? 'refused' : 'error';
    this.#o.metrics.annotationWrites.inc({ result });
    if (status === 404) return this.#forget(uid);
    if (status === 429) {
      if (sentAt > this.#heldAt) {
        this.#throttledInARow++;
        this.#heldAt = this.#o.clock.now();
      }
      const base = Math.max((err as ApiError).retryAfterMs ?? 0, THROTTLED_RETRY_MS) * 2 ** Math.min(this.#throttledInARow - 1, THROTTLED_DOUBLINGS);
      const wait = Math.round(base * (1 + this.#o.random() / 2));
      this.#budget.hold(wait);
      return void this.#queue.addAfter(uid, wait);
    }
    if (status === 409) return this.#newerVersion(uid, kept, path);
    if (result === 'error') {
      this.#o.log.debug({ [F.pod]: `${kept.ref.namespace}/${kept.ref.name}`, [F.err]: err }, 'annotation write failed; retrying');
      return void this.#queue.retry(uid);
    }
    const detail = err instanceof Error ? err.message : String(err);
    const full = status === 422 && /Too long/.test(detail) ? ' (the pod\'s annotations are full: its other annotations leave no room for these values)' : '';
    const message = `could not set ${[...changes.keys()].join(', ')}${full}: ${detail}`;
    this.#refused(kept, refusalOf(message), message);
    this.#queue.retry(uid);
  }

  /**
   * Step 4, a 409: the pod changed since the view the value was computed from. A watch event
   * that came meanwhile has run it again already; otherwise one GET gives the newer version,
   * run at once. Only a failing GET falls back to the backoff.
   */
  async #newerVersion(uid: string, kept: Kept, path: string): Promise<void> {
    if (this.#pods.get(uid) !== kept) return; // a newer event replaced the view, and queued it
    try {
      const now = await this.#o.client.json<PodView>('GET', path);
      if (now.metadata?.uid !== uid) return this.#forget(uid); // a pod of the same name, not this one
      if (this.#pods.get(uid) === kept) this.upsert(slimView(now));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return this.#forget(uid);
      this.#queue.retry(uid);
    }
  }

  /** A write refused or not kept: a Warning Event on the pod, a log line, and who refused it (doctor reads that). */
  #refused(kept: Kept, by: Refusal, message: string): void {
    this.#o.metrics.annotationRefusals.inc({ ...by });
    this.#o.log.warn({ [F.pod]: `${kept.ref.namespace}/${kept.ref.name}`, [F.podUID]: kept.ref.uid, [F.reason]: REASON_ANNOTATION_FAILED }, message);
    this.#o.events.warn(kept.ref, REASON_ANNOTATION_FAILED, message);
  }
}

/** The changes a PATCH's answer (the pod as stored) does not hold; none when the answer is not a pod. */
function notStored(changes: Map<AnnotationKey, string | null>, stored: unknown): [AnnotationKey, string | undefined][] {
  const meta = (stored as { metadata?: { annotations?: Record<string, string> | null } } | undefined)?.metadata;
  if (meta === undefined) return [];
  return [...changes].filter(([k, v]) => (meta.annotations?.[k] ?? null) !== v).map(([k]) => [k, meta.annotations?.[k]]);
}

/**
 * Ours on the pod that its spec does not read: no admission wrote them (it removes them at
 * creation; the writers' policy refuses them after), so a pod admitted where neither ran (a
 * namespace outside the webhook's selector, an install without it) carries its author's lie.
 * The keeper removes them.
 */
function unread(pod: PodView, keys: readonly AnnotationKey[]): AnnotationKey[] {
  const a = pod.metadata?.annotations;
  return a ? ANNOTATION_KEYS.filter((k) => a[k] !== undefined && !keys.includes(k)) : [];
}
