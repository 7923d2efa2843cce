// Kubernetes Events on the object at fault, rate-limited per object so a pod that
// keeps failing cannot flood the API server, and fire-and-forget so a slow API
// never delays projection. At most EVENT_IN_FLIGHT are posted at once; the rest wait
// in a queue, so every object gets its first Event however many fail at once (an
// agent starting on a node with dozens of misconfigured pods). Only past EVENT_QUEUE
// waiting Events, a flood no per-object limit stopped, is an Event dropped and counted.

import type { Logger } from 'pino';
import { F } from '../monitoring/logfields.ts';
import { KeyedRateLimiter } from '../common/ratelimit.ts';
import type { Clock } from '../common/clock.ts';
import { EVENT_IN_FLIGHT, EVENT_LIMIT, EVENT_QUEUE } from '../common/defaults.ts';
import type { ApiClient } from './client.ts';

export const REASON_PROJECTION_FAILED = 'OwnerRefsProjectionFailed';
export const REASON_INVALID_NODE_LABEL = 'OwnerRefsInvalidNodeLabel';
/** On the Node: it follows owners, but the agent may not read a kind (rbac-follow-owners.yaml missing). */
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
  #inFlight = 0;

  constructor(opts: { client: ApiClient; node: string; log: Logger; clock?: Clock }) {
    this.#client = opts.client;
    this.#node = opts.node;
    this.#log = opts.log;
    this.#limiter = new KeyedRateLimiter({ ...EVENT_LIMIT, ...(opts.clock ? { clock: opts.clock } : {}) });
  }

  warn(obj: InvolvedObject, reason: string, message: string): boolean {
    if (this.#waiting.length >= EVENT_QUEUE) return false; // a flood: keep memory bounded
    const suppressed = this.#limiter.take(`${obj.kind}/${obj.namespace ?? ''}/${obj.name}/${reason}`);
    if (suppressed === null) return false;
    const text = cut(suppressed > 0 ? `${message} (${suppressed} similar events suppressed)` : message, MAX_MESSAGE);
    this.#waiting.push(() => this.#post(obj, reason, text)
      .catch((err: unknown) => this.#log.warn({ [F.err]: err, [F.reason]: reason }, 'could not record event')));
    this.#pump();
    return true;
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
      reportingComponent: 'ownerrefs.dev/agent',
      reportingInstance: this.#node,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
  }
}
