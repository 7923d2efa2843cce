// Where projection failures end up: counted, logged once per failure (rate-limited per
// pod, with a count of what was suppressed), and reported as a Warning Event on the pod.
// The reconciler calls it; nothing else logs a ProjectionError.

import type { Logger } from 'pino';
import type { Clock } from '../common/clock.ts';
import { eventText, type ProjectionError } from '../common/errors.ts';
import { REASON_PROJECTION_FAILED, type EventSink, type InvolvedObject } from '../kube/events.ts';
import { F } from '../monitoring/logfields.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import { KeyedRateLimiter } from '../common/ratelimit.ts';
import { FAILURE_LOG_LIMIT } from '../common/defaults.ts';
import { clip } from '../common/validation.ts';

/** Longest message logged for one failure (an Event's is cut at 1 KiB where it is posted). */
const MAX_LOG_MESSAGE = 2048;

export class FailureReporter {
  readonly #log: Logger;
  readonly #events: EventSink;
  readonly #metrics: AgentMetrics;
  /** Per pod: a burst of log lines, then one a minute. */
  readonly #limiter: KeyedRateLimiter;

  constructor(opts: { log: Logger; events: EventSink; metrics: AgentMetrics; clock: Clock }) {
    this.#log = opts.log;
    this.#events = opts.events;
    this.#metrics = opts.metrics;
    this.#limiter = new KeyedRateLimiter({ ...FAILURE_LOG_LIMIT, clock: opts.clock });
  }

  report(pod: InvolvedObject, e: ProjectionError): void {
    this.#metrics.failures.inc({ reason: e.reason });
    const key = `${pod.namespace ?? ''}/${pod.name}`;
    const suppressed = this.#limiter.take(pod.uid ?? key);
    if (suppressed !== null) {
      // One bounded line: the message once (its pod-controlled parts are quoted and cut where
      // they are made), and the underlying error only when there is one (an errno, a stack).
      this.#log.warn({
        [F.pod]: key, [F.podUID]: pod.uid, [F.volume]: e.context.volume, [F.file]: e.context.file,
        [F.reason]: e.reason, [F.err]: e.cause, [F.suppressed]: suppressed || undefined,
      }, clip(e.message, MAX_LOG_MESSAGE));
    }
    if (!this.#events.warn(pod, REASON_PROJECTION_FAILED, eventText(e))) {
      this.#metrics.eventsDropped.inc();
    }
  }

  /** The pod is gone: drop its rate-limit state (bounded memory). */
  forget(uid: string): void {
    this.#limiter.forget(uid);
  }
}
