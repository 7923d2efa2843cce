// Prometheus metrics (prom-client). One registry per agent so tests can run several.
// docs/reference/metrics.md is generated from these: the help is the documentation.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_QUEUE, HANDSHAKE_DEADLINE } from '../common/defaults.ts';

export class AgentMetrics {
  readonly registry = new Registry();

  readonly watchStarts = new Counter({
    name: 'ownerrefs_watch_starts_total',
    help: 'Watch (re)starts by resource and reason: initial (once per life, also when a server without streamed lists refuses the first request and the agent lists instead), timeout (the server\'s timeout, normal), closed (the server ended the watch well before its timeout: draining or restarting), expired (410 Gone), error, stall (nothing received for --stall-seconds).',
    labelNames: ['resource', 'reason'] as const,
    registers: [this.registry],
  });

  readonly relists = new Counter({
    name: 'ownerrefs_relists_total',
    help: 'Full relists after the initial one, by resource and reason (the reasons of ownerrefs_watch_starts_total).',
    labelNames: ['resource', 'reason'] as const,
    registers: [this.registry],
  });

  readonly firstStates = new Counter({
    name: 'ownerrefs_first_states_total',
    help: 'Complete first states (the first and each relist) by resource and how they were read: stream (one watch with sendInitialEvents=true, the API server\'s WatchList feature) or list (a server without it, which the agent then lists from for good, or the one list after a stream that broke off).',
    labelNames: ['resource', 'how'] as const,
    registers: [this.registry],
  });

  readonly apiRequests = new Counter({
    name: 'ownerrefs_api_requests_total',
    help: 'Requests the agent made to the API server, by verb and status code (error: no answer).',
    labelNames: ['verb', 'code'] as const,
    registers: [this.registry],
  });

  readonly apiHandshakeTimeouts = new Counter({
    name: 'ownerrefs_api_handshake_timeouts_total',
    help: `New connections to the API server given up because their TLS handshake did not finish in time (${HANDSHAKE_DEADLINE.initialMs / 1000} s, doubling to ${HANDSHAKE_DEADLINE.maxMs / 1000} s): accepted but not served (a server still starting, one too loaded to handshake, a load balancer without a serving backend). Also counted in ownerrefs_api_requests_total as code="error".`,
    registers: [this.registry],
  });

  readonly ownerReads = new Counter({
    name: 'ownerrefs_owner_reads_total',
    help: 'Metadata-only reads of pods\' owners (nodes that follow owners), by kind, outcome (ok or the status code) and why (new: first sight on this node; refresh).',
    labelNames: ['kind', 'code', 'why'] as const,
    registers: [this.registry],
  });

  readonly fileWrites = new Counter({
    name: 'ownerrefs_file_writes_total',
    help: 'Projected files written (renamed into place).',
    registers: [this.registry],
  });

  readonly fileUnchanged = new Counter({
    name: 'ownerrefs_file_unchanged_total',
    help: 'Projected files checked on disk and found already correct (no write).',
    registers: [this.registry],
  });

  readonly failures = new Counter({
    name: 'ownerrefs_projection_failures_total',
    help: 'Projection failures by reason (the reasons of the OwnerRefsProjectionFailed Event).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly eventsDropped = new Counter({
    name: 'ownerrefs_events_dropped_total',
    help: `Kubernetes Events not sent: an object over its rate limit, or more than ${EVENT_QUEUE} waiting for the API server.`,
    registers: [this.registry],
  });

  readonly latency = new Histogram({
    name: 'ownerrefs_propagation_seconds',
    help: 'Time from receiving a pod event to its files being renamed into place.',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly annotationWrites = new Counter({
    name: 'ownerrefs_annotation_writes_total',
    help: 'PATCHes of pod annotations that the KEP syntax reads, by result: ok, conflict (the pod changed since the view the value was computed from: run again at once from the newer one), notfound, forbidden (403: RBAC or an admission policy), invalid (422: the API server\'s validation refused the value, e.g. a pod whose annotations leave no room for it), refused (any other 4xx, e.g. a policy engine\'s 400), overridden (answered 2xx, but a mutating webhook or policy stored another value), throttled (429 from API Priority and Fairness: the node\'s writes wait its Retry-After), error (no answer, 5xx); forbidden, invalid, refused and overridden post a Warning Event and are retried with backoff.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly annotationRefusals = new Counter({
    name: 'ownerrefs_annotation_refusals_total',
    help: 'Annotation PATCHes refused (403), by who refused (by: "ValidatingAdmissionPolicy NAME", "webhook NAME", "RBAC" or "other") and, for the agent\'s own policy, its message (reason). doctor reads them.',
    labelNames: ['by', 'reason'] as const,
    registers: [this.registry],
  });

  readonly annotationPods = new Gauge({
    name: 'ownerrefs_annotation_pods',
    help: 'Pods on this node whose spec reads an ownerrefs.dev annotation, which the agent keeps current.',
    registers: [this.registry],
  });

  readonly annotationLatency = new Histogram({
    name: 'ownerrefs_annotation_propagation_seconds',
    help: 'Time from receiving a pod event that changes what its annotations should say to the PATCH that sets them being answered.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly podsTracked = new Gauge({
    name: 'ownerrefs_pods_tracked',
    help: 'Pods on this node that opted in (the ownerrefs.dev/volume annotation or an ownerrefs.dev CSI volume).',
    registers: [this.registry],
  });

  readonly volumesTracked = new Gauge({
    name: 'ownerrefs_volumes_tracked',
    help: 'Volumes the agent keeps files in.',
    registers: [this.registry],
  });

  /** What ownerrefs_volumes_unwatched reads at each scrape (agent.ts points it at the directory watcher). */
  unwatchedVolumes: () => number = () => 0;

  readonly volumesUnwatched: Gauge = new Gauge({
    name: 'ownerrefs_volumes_unwatched',
    help: 'Volumes without a directory watch (the node ran out of inotify watches, which the agent shares with the kubelet and the container runtime): healed only by the periodic resync until the watch, retried every few seconds, is set up.',
    registers: [this.registry],
    collect: () => this.volumesUnwatched.set(this.unwatchedVolumes()),
  });

  readonly lastSync = new Gauge({
    name: 'ownerrefs_last_sync_timestamp_seconds',
    help: 'Unix time of the last successful sync of any volume.',
    registers: [this.registry],
  });

  /** Read at scrape time from each watch (see watchDown). */
  readonly #downFor = new Map<string, () => number>();

  readonly watchDown = new Gauge({
    name: 'ownerrefs_watch_down_seconds',
    help: 'How long the watch of this resource (pods or nodes) has been down (0 while it is connected); the pods watch is what keeps files current.',
    labelNames: ['resource'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [resource, fn] of this.#downFor) this.watchDown.set({ resource }, fn() / 1000);
    },
  });

  /** Report a watch's downtime (milliseconds) under `resource`. */
  watchDownFrom(resource: string, downForMs: () => number): void {
    this.#downFor.set(resource, downForMs);
  }

  constructor(opts: { processMetrics?: boolean } = {}) {
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'ownerrefs_' });
  }
}
