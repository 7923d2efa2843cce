// `ownerrefs-agent webhook`: wiring only. TLS from files (re-read when they change) or
// self-managed (certs.ts), the HTTPS server (server.ts), health and metrics.

import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import chokidar from 'chokidar';
import type { Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { KubeApiClient } from '../kube/client.ts';
import { KubeCredentials } from '../kube/kubeconfig.ts';
import { startHealthServer } from '../monitoring/health.ts';
import { F } from '../monitoring/logfields.ts';
import type { WebhookConfig } from './config.ts';
import { SERVED_KINDS } from './review.ts';
import { AdmissionChains } from './chains.ts';
import { startWebhookServer, type TlsMaterial } from './server.ts';

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
  const seconds = new Histogram({ name: 'ownerrefs_webhook_review_seconds', help: 'Time from a review\'s arrival to its answer', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1], registers: [registry] });
  // The error series exist from the start at 0: an alert on increase() cannot see the first
  // error of a series that appears at 1.
  for (const kind of [...SERVED_KINDS, 'other']) reviews.inc({ result: 'error', kind }, 0);
  const expiry = new Gauge({ name: 'ownerrefs_webhook_certificate_expiry_timestamp_seconds', help: 'When the serving certificate expires (Unix time)', registers: [registry] });
  // The chains of pods that read their workload: owners' metadata, read and cached (chains.ts).
  const ownerReads = new Counter({ name: 'ownerrefs_webhook_owner_reads_total', help: 'Metadata reads of pods\' owners for the workload values set at admission, by kind and outcome (ok or the status code)', labelNames: ['kind', 'code'], registers: [registry] });
  new Gauge({ name: 'ownerrefs_webhook_owners_cached', help: 'Owners whose metadata the webhook holds (at most --max-owners: the least lately used goes first)', registers: [registry], collect() { this.set(owners()); } });
  return { registry, reviews, seconds, expiry, ownerReads };
}

export async function startWebhook(cfg: WebhookConfig, log: Logger): Promise<RunningWebhook> {
  let ownersCached = () => 0; // the cache is made once TLS is up; scrapes start later still
  const { registry, reviews, seconds, expiry, ownerReads } = webhookMetrics(() => ownersCached());
  /** When the certificate being served is valid; readiness follows it, not the last refresh. */
  let validity: { from: number; to: number } | undefined;

  let tls: TlsMaterial;
  let refresh: () => Promise<TlsMaterial | undefined>;
  let watcher: { close(): Promise<void> } | undefined;
  let timer: NodeJS.Timeout | undefined;
  // Files: re-read each minute (a Secret volume swaps a symlink, which a watch on the old
  // target may not see). Self-managed: certs.ts's check, each minute too.
  let checkMs = 60_000;
  if (cfg.certFile && cfg.keyFile) {
    const read = () => readTlsFiles(cfg.certFile!, cfg.keyFile!);
    tls = await read();
    refresh = read;
  } else {
    // Loaded only in self-managed mode: the certificate library is not small.
    const certs = await import('./certs.ts');
    const api = new KubeApiClient(cfg.kubeconfig ? KubeCredentials.fromFile(cfg.kubeconfig) : KubeCredentials.inCluster());
    const svc = cfg.service;
    const names = [svc, `${svc}.${cfg.namespace}`, `${svc}.${cfg.namespace}.svc`, ...cfg.extraSans.filter((s) => !isIP(s))];
    const opts = {
      namespace: cfg.namespace, secretName: cfg.secret, dnsNames: names, ipAddresses: cfg.extraSans.filter((s) => isIP(s)),
      trusted: () => certs.configuredCas(api, cfg.configName), seenFor: certs.firstSeen(),
    };
    refresh = async () => {
      const t = await certs.ensureServingTls(api, opts);
      const patched = await certs.syncCaBundle(api, cfg.configName, t.caBundle);
      if (patched > 0) log.info({ webhooks: patched }, 'caBundle updated in the webhook configuration');
      return t;
    };
    tls = (await refresh())!;
    checkMs = certs.CHECK_MS;
  }
  validity = setExpiry(tls, expiry);

  // Credentials that cannot be loaded cost only these values (Unavailable): TLS from files needs no API.
  let ownerClient: Pick<KubeApiClient, 'json' | 'stream'>;
  try {
    ownerClient = new KubeApiClient(cfg.kubeconfig ? KubeCredentials.fromFile(cfg.kubeconfig) : KubeCredentials.inCluster());
  } catch (err) {
    log.warn({ [F.err]: String(err) }, 'no API credentials: pods that read their workload get "(unresolved: Unavailable)" at admission, until the agent fills it in');
    ownerClient = { json: () => Promise.reject(err), stream: () => Promise.reject(err) };
  }
  const chains = new AdmissionChains({
    client: ownerClient, log,
    budgetMs: cfg.ownerBudgetMs, refreshMs: cfg.ownerRefreshMs, maxOwners: cfg.maxOwners, followKinds: cfg.followKinds,
    observe: (kind, code) => ownerReads.inc({ kind, code }),
  });
  ownersCached = () => chains.owners;

  const server = await startWebhookServer({
    host: cfg.listenHost, port: cfg.listenPort, tls, log, chains: (ns, owners) => chains.resolve(ns, owners),
    observe: (result, kind, s) => {
      reviews.inc({ result, kind });
      if (s !== undefined) seconds.observe(s);
    },
  });
  // One check at a time (an older check finishing after a newer one would serve the older
  // pair); one asked for meanwhile runs after it (a key file changed while the certificate was read).
  let checking = false;
  let again: string | undefined;
  const reload = async (why: string): Promise<void> => {
    if (checking) {
      again = why;
      return;
    }
    checking = true;
    try {
      const next = await refresh();
      if (next && (next.cert !== tls.cert || next.key !== tls.key)) {
        server.setTls(next);
        tls = next;
        validity = setExpiry(tls, expiry);
        log.info({ [F.reason]: why }, 'serving certificate replaced');
      }
    } catch (err) {
      // Still ready: the certificate served is as good as before, and a cause every replica
      // shares (an API outage, an RBAC change) must not leave the Service with none ready.
      // The next check retries; a certificate that nears its end raises its own alert.
      log.warn({ [F.err]: String(err), [F.reason]: why }, 'refreshing the serving certificate failed; still serving the current one');
    } finally {
      checking = false;
      const next = again;
      again = undefined;
      if (next !== undefined) void reload(next);
    }
  };
  if (cfg.certFile) {
    const w = chokidar.watch([cfg.certFile, cfg.keyFile!], { ignoreInitial: true, awaitWriteFinish: { stabilityThreshold: 500 } });
    w.on('all', () => void reload('certificate files changed'));
    watcher = w;
  }
  timer = setInterval(() => void reload('periodic check'), checkMs);
  timer.unref();
  let draining = false;
  const health = await startHealthServer({ host: cfg.healthHost, port: cfg.healthPort, registry,
    ready: () => (draining ? ['shutting down'] : notServable(validity, Date.now())) });
  const port = (server.server.address() as { port: number }).port;
  const healthPort = (health.address() as { port: number }).port;
  log.info({ port, healthPort, selfManaged: !cfg.certFile }, 'webhook serving');
  return {
    port,
    healthPort,
    drain() {
      draining = true;
      server.drain();
    },
    async stop() {
      if (timer) clearInterval(timer);
      await watcher?.close();
      await server.close();
      chains.close();
      await new Promise<void>((r) => health.close(() => r()));
    },
  };
}

/**
 * The serving pair from files, each checked on its own, so that an error names the file at
 * fault rather than OpenSSL's "PEM routines::no start line" for one of the two.
 */
async function readTlsFiles(certFile: string, keyFile: string): Promise<TlsMaterial> {
  const { X509Certificate, createPrivateKey } = process.getBuiltinModule('node:crypto');
  const load = async (file: string, flag: string, what: string, check: (pem: string) => unknown) => {
    let pem: string;
    try {
      pem = await readFile(file, 'utf8');
    } catch (err) {
      throw new Error(`--${flag} ${JSON.stringify(file)}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
    }
    try {
      check(pem);
    } catch (err) {
      throw new Error(`--${flag} ${JSON.stringify(file)}: not a PEM ${what} (${(err as Error).message})`, { cause: err });
    }
    return pem;
  };
  const cert = await load(certFile, 'tls-cert-file', 'certificate', (pem) => new X509Certificate(pem));
  const key = await load(keyFile, 'tls-key-file', 'private key', (pem) => createPrivateKey(pem));
  if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) {
    throw new Error(`--tls-key-file ${JSON.stringify(keyFile)} is not the key of the certificate in --tls-cert-file ${JSON.stringify(certFile)}`);
  }
  return { cert, key };
}

/** Sets the expiry gauge; returns when the certificate is valid (undefined if it cannot be read). */
function setExpiry(tls: TlsMaterial, g: Gauge): { from: number; to: number } | undefined {
  try {
    const { X509Certificate } = process.getBuiltinModule('node:crypto');
    const cert = new X509Certificate(tls.cert);
    const validity = { from: Date.parse(cert.validFrom), to: Date.parse(cert.validTo) };
    g.set(validity.to / 1000);
    return validity;
  } catch {
    return undefined; // not a certificate we can read; the TLS handshake will say so
  }
}

/** Why the API server would refuse the certificate served now (readiness), or nothing. */
export function notServable(validity: { from: number; to: number } | undefined, now: number): string[] {
  if (!validity) return ['no readable serving certificate'];
  if (now < validity.from) return [`the serving certificate is not valid before ${new Date(validity.from).toISOString()}`];
  if (now >= validity.to) return [`the serving certificate expired at ${new Date(validity.to).toISOString()}`];
  return [];
}
