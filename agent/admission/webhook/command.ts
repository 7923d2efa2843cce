// `ownerrefs-agent webhook`: wiring only. The serving pair (tlssource.ts), the owners'
// metadata for workload values (chains.ts), the HTTPS server (server.ts), health and metrics.

import type { Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { KubeApiClient } from '../../kube/client.ts';
import { KubeCredentials } from '../../kube/kubeconfig.ts';
import { startHealthServer } from '../../monitoring/health.ts';
import { F } from '../../monitoring/logfields.ts';
import type { WebhookConfig } from './config.ts';
import { SERVED_KINDS } from './review.ts';
import { AdmissionChains } from '../../owners/admissionchains.ts';
import { startWebhookServer } from './server.ts';
import { TlsSource } from './tlssource.ts';
import { DENIAL_REASONS } from './objects.ts';

export interface RunningWebhook {
  port: number;
  healthPort: number;
  /**
   * The first step of stopping: unready, and each answer closes its connection. The API
   * server keeps calling a replica until its endpoint is gone from the Service's
   * EndpointSlices (and over connections it already holds): stopping at once refuses those
   * calls, and with failurePolicy Fail the pods they admit.
   */
  drain(): void;
  stop(): Promise<void>;
}

/**
 * The webhook's metrics on a registry of their own; `owners` is read at each scrape.
 * docs/reference/metrics.md is generated from them.
 */
export function webhookMetrics(owners: () => number, opts: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const reviews = new Counter({ name: 'ownerrefs_webhook_reviews_total', help: 'AdmissionReviews answered, by result (mutated, unchanged, denied; malformed: a body that is not a review, too large or too slow; error: a review it could not process, denied) and kind (a served kind, other, or empty when unread)', labelNames: ['result', 'kind'], registers: [registry] });
  const denials = new Counter({ name: 'ownerrefs_webhook_denials_total', help: 'Objects the webhook refused, by reason (InvalidOwnerReferences: an owner Kubernetes would not decode; AnnotationsTooLarge: the annotations would pass the API server\'s 256 KiB)', labelNames: ['reason'], registers: [registry] });
  for (const reason of DENIAL_REASONS) denials.inc({ reason }, 0);
  const seconds = new Histogram({ name: 'ownerrefs_webhook_review_seconds', help: 'Time from a review\'s arrival to its answer', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1], registers: [registry] });
  // The error series exist from the start at 0: an alert on increase() cannot see the first
  // error of a series that appears at 1.
  for (const kind of [...SERVED_KINDS, 'other']) reviews.inc({ result: 'error', kind }, 0);
  const expiry = new Gauge({ name: 'ownerrefs_webhook_certificate_expiry_timestamp_seconds', help: 'When the serving certificate expires (Unix time)', registers: [registry] });
  // The chains of pods that read their workload: owners' metadata, read and cached (chains.ts).
  const ownerReads = new Counter({ name: 'ownerrefs_webhook_owner_reads_total', help: 'Metadata reads of pods\' owners for the workload values set at admission, by kind and outcome (ok or the status code)', labelNames: ['kind', 'code'], registers: [registry] });
  new Gauge({ name: 'ownerrefs_webhook_owners_cached', help: 'Owners whose metadata the webhook holds (at most --max-owners: the least lately used goes first)', registers: [registry], collect() { this.set(owners()); } });
  return { registry, reviews, denials, seconds, expiry, ownerReads };
}

export async function startWebhook(cfg: WebhookConfig, log: Logger): Promise<RunningWebhook> {
  let ownersCached = () => 0; // the cache is made once TLS is up; scrapes start later still
  const { registry, reviews, denials, seconds, expiry, ownerReads } = webhookMetrics(() => ownersCached());
  const tls = await TlsSource.load(cfg, log, expiry);
  const chains = new AdmissionChains({
    client: ownerClient(cfg, log), log,
    budgetMs: cfg.ownerBudgetMs, refreshMs: cfg.ownerRefreshMs, maxOwners: cfg.maxOwners, followKinds: cfg.followKinds,
    observe: (kind, code) => ownerReads.inc({ kind, code }),
  });
  ownersCached = () => chains.owners;
  const server = await startWebhookServer({
    host: cfg.listenHost, port: cfg.listenPort, tls: tls.tls, log, chains: (ns, owners) => chains.resolve(ns, owners),
    observe: (result, kind, s, reason) => {
      reviews.inc({ result, kind });
      if (reason) denials.inc({ reason });
      if (s !== undefined) seconds.observe(s);
    },
  });
  tls.follow((next) => server.setTls(next));
  let draining = false;
  const health = await startHealthServer({ host: cfg.healthHost, port: cfg.healthPort, registry,
    ready: () => (draining ? ['shutting down'] : tls.notServable(Date.now())) });
  const port = (server.server.address() as { port: number }).port;
  const healthPort = (health.address() as { port: number }).port;
  log.info({ port, healthPort, selfManaged: tls.selfManaged }, 'webhook serving');
  return {
    port,
    healthPort,
    drain() {
      draining = true;
      server.drain();
    },
    async stop() {
      await tls.close();
      await server.close();
      chains.close();
      await new Promise<void>((r) => health.close(() => r()));
    },
  };
}

/** The client for owners' metadata. Credentials that cannot be loaded cost only the workload values (Unavailable): TLS from files needs no API. */
function ownerClient(cfg: WebhookConfig, log: Logger): Pick<KubeApiClient, 'json' | 'stream'> {
  try {
    return new KubeApiClient(KubeCredentials.load(cfg.kubeconfig));
  } catch (err) {
    log.warn({ [F.err]: String(err) }, 'no API credentials: pods that read their workload get "(unresolved: Unavailable)" at admission, until the agent fills it in');
    return { json: () => Promise.reject(err), stream: () => Promise.reject(err) };
  }
}
