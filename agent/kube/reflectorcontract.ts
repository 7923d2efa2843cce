// The reflector's contract with the rest of the agent: what it feeds (the handler: the
// policy's pod table, the Node's settings) and what it reports (the observer: metrics and
// logs). The policy depends on this, not on how the reflector lists and watches.

import type { ApiError } from './client.ts';

export interface KubeObject {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string } | undefined;
}

/** What the reflector feeds. Calls are synchronous and in watch order. */
export interface ReflectorHandler<T extends KubeObject> {
  /** The full current set after a (re)list: reconcile the difference. */
  replace(items: T[]): void;
  upsert(obj: T): void;
  /** Absent: a deletion changes nothing for this handler (the Node's settings outlive the Node). */
  remove?(obj: T): void;
  /**
   * What of an object to hold while a streamed first state is still arriving (default:
   * the whole object). The result is what replace receives, so it must carry everything
   * replace reads.
   */
  retain?(obj: T): T;
}

export type RestartReason = 'initial' | 'timeout' | 'closed' | 'expired' | 'error' | 'stall';

export interface ReflectorObserver {
  watchStarted?(reason: RestartReason): void;
  relisted?(reason: RestartReason): void;
  /** A complete first state (the first or a relist) was handed to replace. */
  synced?(how: 'stream' | 'list', reason: RestartReason): void;
  failed?(err: unknown, backoffMs: number): void;
  /** The server refused a streamed first state: this reflector lists from now on. */
  streamRefused?(err: ApiError): void;
}
