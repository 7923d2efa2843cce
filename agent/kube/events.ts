// Kubernetes Events on the object at fault, rate-limited per object so a pod that
// keeps failing cannot flood the API server, and fire-and-forget so a slow API
// never delays projection. At most EVENT_IN_FLIGHT are posted at once; the rest wait
// in a queue, so every object gets its first Event however many fail at once (an
// agent starting on a node with dozens of misconfigured pods). Only past EVENT_QUEUE
// waiting Events, a flood no per-object limit stopped, is an Event dropped and counted
// (a retry that meets a full queue is dropped and logged). An Event the server refuses
// for a moment is posted again, EVENT_TRIES times in all.

import type { Logger } from 'pino';
import { F } from '../monitoring/logfields.ts';
import { KeyedRateLimiter } from '../common/ratelimit.ts';
import { realClock, type Clock } from '../common/clock.ts';
import { EVENT_IN_FLIGHT, EVENT_LIMIT, EVENT_QUEUE, EVENT_RETRY_MS, EVENT_TRIES } from '../common/defaults.ts';
import { errnoOf } from '../common/errors.ts';
import { ApiError, type ApiClient } from './client.ts';
import { EVENT_COMPONENT } from '../../projections/names.ts';

export const REASON_PROJECTION_FAILED = 'OwnerRefsProjectionFailed';
export const REASON_INVALID_NODE_LABEL = 'OwnerRefsInvalidNodeLabel';
/** On the Node: the agent may not read an owner's kind (rbac-follow-owners.yaml missing). */
export const REASON_FOLLOW_FORBIDDEN = 'OwnerRefsFollowForbidden';

export interface InvolvedObject {
  kind: 'Pod' | 'Node';
  name: string;
  namespace?: string | undefined;
  uid?: string | undefined;
}

/** The seam the agent uses to report misuse; tests may record calls instead. */
export interface EventSink {
  /** Returns false when the event was dropped by rate limiting. */
  warn(obj: InvolvedObject, reason: string, message: string): boolean;
}

const MAX_MESSAGE = 1024;

/** The server is busy or away, not refusing this Event: 429, 5xx, or no answer at all. */
function transient(err: unknown): boolean {
  if (err instanceof ApiError) return err.status === 429 || err.status >= 500;
  return errnoOf(err) !== undefined;
}

/** `s` in at most `max` UTF-16 units, marked with '…' when cut, never ending in half a surrogate pair. */
export function cut(s: string, max: number): string {
  if (s.length <= max) return s;
  let end = max - 1;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--; // a high surrogate whose low half would be cut off
  return `${s.slice(0, end)}…`;
}

export class ApiEventSink implements EventSink {
  readonly #client: ApiClient;
  readonly #node: string;
  readonly #log: Logger;
  readonly #limiter: KeyedRateLimiter;
  readonly #waiting: (() => Promise<void>)[] = [];
  readonly #clock: Clock;
  readonly #random: () => number;
  /** Retries waiting for their time. */
  readonly #timers = new Set<() => void>();
  #inFlight = 0;
  #closed = false;

  constructor(opts: { client: ApiClient; node: string; log: Logger; clock?: Clock; random?: () => number }) {
    this.#client = opts.client;
    this.#node = opts.node;
    this.#log = opts.log;
    this.#clock = opts.clock ?? realClock;
    this.#random = opts.random ?? Math.random;
    this.#limiter = new KeyedRateLimiter({ ...EVENT_LIMIT, clock: this.#clock });
  }

  warn(obj: InvolvedObject, reason: string, message: string): boolean {
    if (this.#waiting.length >= EVENT_QUEUE) return false; // a flood: keep memory bounded
    const suppressed = this.#limiter.take(`${obj.kind}/${obj.namespace ?? ''}/${obj.name}/${reason}`);
    if (suppressed === null) return false;
    const text = cut(suppressed > 0 ? `${message} (${suppressed} similar events suppressed)` : message, MAX_MESSAGE);
    this.#enqueue(obj, reason, text, 1);
    return true;
  }

  /**
   * Post now or in turn. A transient refusal (429 from priority and fairness, 5xx, no
   * answer) is posted again after the server's Retry-After or a backoff, up to EVENT_TRIES
   * in all, so a first Event is not lost to a busy moment; anything else is logged once.
   */
  #enqueue(obj: InvolvedObject, reason: string, text: string, attempt: number): void {
    this.#waiting.push(() => this.#post(obj, reason, text).catch((err: unknown) => {
      if (attempt >= EVENT_TRIES || !transient(err) || this.#closed) {
        this.#log.warn({ [F.err]: err, [F.reason]: reason, attempts: attempt }, 'could not record event');
        return;
      }
      const backoff = EVENT_RETRY_MS * 2 ** (attempt - 1) * (0.5 + this.#random() / 2);
      const delay = Math.max(backoff, err instanceof ApiError ? err.retryAfterMs ?? 0 : 0);
      const cancel = this.#clock.setTimer(() => {
        this.#timers.delete(cancel);
        if (this.#closed) return;
        if (this.#waiting.length < EVENT_QUEUE) this.#enqueue(obj, reason, text, attempt + 1);
        else this.#log.warn({ [F.err]: err, [F.reason]: reason, attempts: attempt }, 'could not record event (too many waiting to retry)');
      }, delay);
      this.#timers.add(cancel);
    }));
    this.#pump();
  }

  /** Stop retrying (the agent is stopping); posts in flight finish. */
  close(): void {
    this.#closed = true;
    for (const cancel of this.#timers) cancel();
    this.#timers.clear();
  }

  #pump(): void {
    while (this.#inFlight < EVENT_IN_FLIGHT && this.#waiting.length > 0) {
      const post = this.#waiting.shift()!;
      this.#inFlight++;
      void post().finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  async #post(obj: InvolvedObject, reason: string, message: string): Promise<void> {
    // Cluster-scoped objects (Nodes) get their events in "default", as the kubelet does.
    const ns = obj.namespace ?? 'default';
    const now = new Date().toISOString();
    await this.#client.json('POST', `/api/v1/namespaces/${encodeURIComponent(ns)}/events`, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${obj.name}.`, namespace: ns },
      involvedObject: { apiVersion: 'v1', kind: obj.kind, name: obj.name, namespace: obj.namespace, uid: obj.uid },
      type: 'Warning',
      reason,
      message,
      source: { component: 'ownerrefs-agent', host: this.#node },
      reportingComponent: EVENT_COMPONENT,
      reportingInstance: this.#node,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
  }
}
