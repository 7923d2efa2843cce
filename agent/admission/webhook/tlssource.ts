// The webhook's serving pair and keeping it current, from one of two sources:
//   files         --tls-cert-file and --tls-key-file (cert-manager or your own PKI), re-read
//                 when they change and each minute (a Secret volume swaps a symlink, which a
//                 watch on the old target may not see);
//   self-managed  certs.ts makes and renews a CA and serving pair in a Secret, and keeps the
//                 configuration's caBundle current, checked each CHECK_MS.
// Readiness follows the certificate being served, not the last refresh: a refresh that fails
// keeps serving the current pair.

import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import chokidar from 'chokidar';
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import { KubeApiClient } from '../../kube/client.ts';
import { KubeCredentials } from '../../kube/kubeconfig.ts';
import { F } from '../../monitoring/logfields.ts';
import type { WebhookConfig } from './config.ts';
import type { TlsMaterial } from './server.ts';

export type TlsSourceConfig = Pick<WebhookConfig, 'certFile' | 'keyFile' | 'kubeconfig' | 'service' | 'namespace' | 'extraSans' | 'secret' | 'configName'>;

export class TlsSource {
  #tls: TlsMaterial;
  #validity: { from: number; to: number } | undefined;
  readonly #refresh: () => Promise<TlsMaterial | undefined>;
  readonly #checkMs: number;
  readonly #cfg: TlsSourceConfig;
  readonly #log: Logger;
  readonly #expiry: Gauge;
  #watcher: { close(): Promise<void> } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #checking = false;
  #again: string | undefined;

  private constructor(cfg: TlsSourceConfig, log: Logger, expiry: Gauge, tls: TlsMaterial, refresh: () => Promise<TlsMaterial | undefined>, checkMs: number) {
    this.#cfg = cfg;
    this.#log = log;
    this.#expiry = expiry;
    this.#tls = tls;
    this.#refresh = refresh;
    this.#checkMs = checkMs;
    this.#validity = setExpiry(tls, expiry);
  }

  /** The first pair, read or made; a failure here stops the webhook's start. */
  static async load(cfg: TlsSourceConfig, log: Logger, expiry: Gauge): Promise<TlsSource> {
    if (cfg.certFile && cfg.keyFile) {
      const read = () => readTlsFiles(cfg.certFile!, cfg.keyFile!);
      return new TlsSource(cfg, log, expiry, await read(), read, 60_000);
    }
    // Loaded only in self-managed mode: the certificate library is not small.
    const certs = await import('./certs.ts');
    const api = new KubeApiClient(KubeCredentials.load(cfg.kubeconfig));
    const svc = cfg.service;
    const names = [svc, `${svc}.${cfg.namespace}`, `${svc}.${cfg.namespace}.svc`, ...cfg.extraSans.filter((s) => !isIP(s))];
    const opts = {
      namespace: cfg.namespace, secretName: cfg.secret, dnsNames: names, ipAddresses: cfg.extraSans.filter((s) => isIP(s)),
      trusted: () => certs.configuredCas(api, cfg.configName), seenFor: certs.firstSeen(),
    };
    const refresh = async () => {
      const t = await certs.ensureServingTls(api, opts);
      const patched = await certs.syncCaBundle(api, cfg.configName, t.caBundle);
      if (patched > 0) log.info({ webhooks: patched }, 'caBundle updated in the webhook configuration');
      return t;
    };
    return new TlsSource(cfg, log, expiry, (await refresh())!, refresh, certs.CHECK_MS);
  }

  get tls(): TlsMaterial {
    return this.#tls;
  }

  get selfManaged(): boolean {
    return !this.#cfg.certFile;
  }

  /** Why the API server would refuse the certificate served now (readiness), or nothing. */
  notServable(now: number): string[] {
    return notServable(this.#validity, now);
  }

  /** From now on, check for a new pair (files changed, or the timer) and hand it to `replaced`. */
  follow(replaced: (tls: TlsMaterial) => void): void {
    if (this.#cfg.certFile) {
      const w = chokidar.watch([this.#cfg.certFile, this.#cfg.keyFile!], { ignoreInitial: true, awaitWriteFinish: { stabilityThreshold: 500 } });
      w.on('all', () => void this.#reload('certificate files changed', replaced));
      this.#watcher = w;
    }
    this.#timer = setInterval(() => void this.#reload('periodic check', replaced), this.#checkMs);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#watcher?.close();
  }

  /**
   * One check at a time (an older check finishing after a newer one would serve the older
   * pair); one asked for meanwhile runs after it (a key file changed while the certificate was read).
   */
  async #reload(why: string, replaced: (tls: TlsMaterial) => void): Promise<void> {
    if (this.#checking) {
      this.#again = why;
      return;
    }
    this.#checking = true;
    try {
      const next = await this.#refresh();
      if (next && (next.cert !== this.#tls.cert || next.key !== this.#tls.key)) {
        replaced(next);
        this.#tls = next;
        this.#validity = setExpiry(next, this.#expiry);
        this.#log.info({ [F.reason]: why }, 'serving certificate replaced');
      }
    } catch (err) {
      // Still ready: the certificate served is as good as before, and a cause every replica
      // shares (an API outage, an RBAC change) must not leave the Service with none ready.
      // The next check retries; a certificate that nears its end raises its own alert.
      this.#log.warn({ [F.err]: String(err), [F.reason]: why }, 'refreshing the serving certificate failed; still serving the current one');
    } finally {
      this.#checking = false;
      const next = this.#again;
      this.#again = undefined;
      if (next !== undefined) void this.#reload(next, replaced);
    }
  }
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
