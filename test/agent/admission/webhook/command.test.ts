// `webhook` with certificate files (cert-manager's mode): served, and re-read when they change.

import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError, type ApiClient } from '../../../../agent/kube/client.ts';
import { ensureServingTls } from '../../../../agent/admission/webhook/certs.ts';
import { startWebhook, type RunningWebhook } from '../../../../agent/admission/webhook/command.ts';
import { parseWebhookConfig } from '../../../../agent/admission/webhook/config.ts';
import { waitFor } from '../../../../localcluster/wait.ts';
import { memoryLogger } from '../../../support/agentkit.ts';
import { tmpDir } from '../../../support/tmpdir.ts';

/** A fresh CA and serving pair each call (an empty Secret store). */
async function pair() {
  let secret: unknown;
  const api: ApiClient = {
    async json<T>(method: string, _p: string, body?: unknown): Promise<T> {
      if (method === 'GET') { if (!secret) throw new ApiError(404, 'NotFound', 'nf'); return secret as T; }
      secret = { ...(body as object), metadata: { resourceVersion: '1' } };
      return secret as T;
    },
    stream: () => Promise.reject(new Error('no')),
  };
  return ensureServingTls(api, { namespace: 'n', secretName: 's', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
}

function servedSerial(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(new X509Certificate(s.getPeerX509Certificate()!.raw).serialNumber);
      s.end();
    });
    s.on('error', reject);
  });
}

let w: RunningWebhook | undefined;
afterAll(() => w?.stop());

describe('webhook with --tls-cert-file/--tls-key-file', () => {
  it('serves the files and swaps in new ones when they change, needing no API access', async () => {
    const dir = tmpDir();
    const cert = path.join(dir, 'tls.crt');
    const key = path.join(dir, 'tls.key');
    const first = await pair();
    writeFileSync(cert, first.cert);
    writeFileSync(key, first.key);
    const cfg = parseWebhookConfig(['--listen=127.0.0.1:0', '--health-addr=127.0.0.1:0', `--tls-cert-file=${cert}`, `--tls-key-file=${key}`, '--kubeconfig=/nonexistent'], {});
    w = await startWebhook(cfg, memoryLogger().log);
    expect(await servedSerial(w.port)).toBe(new X509Certificate(first.cert).serialNumber);
    const ready = await fetch(`http://127.0.0.1:${w.healthPort}/readyz`);
    expect(ready.status).toBe(200);
    const second = await pair();
    writeFileSync(key, second.key);
    writeFileSync(cert, second.cert);
    const want = new X509Certificate(second.cert).serialNumber;
    await waitFor(async () => (await servedSerial(w!.port)) === want || undefined, { describe: 'the new certificate served', timeoutMs: 20_000 });
    const metrics = await (await fetch(`http://127.0.0.1:${w.healthPort}/metrics`)).text();
    // At 0 from the start, so that an alert on increase() sees the first error (prom-client
    // would otherwise make the series appear at 1).
    expect(metrics).toContain('ownerrefs_webhook_reviews_total{result="error",kind="Pod"} 0');
    expect(metrics).toContain('ownerrefs_webhook_reviews_total{result="error",kind="other"} 0');
    expect(metrics).toMatch(new RegExp(`ownerrefs_webhook_certificate_expiry_timestamp_seconds ${Math.floor(Date.parse(new X509Certificate(second.cert).validTo) / 1000)}`));
  });

  it('drain(), the first step of SIGTERM: unready ("shutting down") while it still serves', async () => {
    const dir = tmpDir();
    const p = await pair();
    writeFileSync(path.join(dir, 'tls.crt'), p.cert);
    writeFileSync(path.join(dir, 'tls.key'), p.key);
    const d = await startWebhook(parseWebhookConfig(['--listen=127.0.0.1:0', '--health-addr=127.0.0.1:0', `--tls-cert-file=${dir}/tls.crt`, `--tls-key-file=${dir}/tls.key`, '--kubeconfig=/nonexistent'], {}), memoryLogger().log);
    try {
      expect((await fetch(`http://127.0.0.1:${d.healthPort}/readyz`)).status).toBe(200);
      d.drain();
      const ready = await fetch(`http://127.0.0.1:${d.healthPort}/readyz`);
      expect({ status: ready.status, body: await ready.text() }).toEqual({ status: 503, body: expect.stringContaining('shutting down') });
      expect(await servedSerial(d.port)).toBe(new X509Certificate(p.cert).serialNumber);
    } finally {
      await d.stop();
    }
  });

  // Each failure names the file at fault (OpenSSL alone says "PEM routines::no start line").
  it.each([
    { what: 'a certificate file that is not PEM', cert: 'junk', key: 'good', message: /^--tls-cert-file ".*tls\.crt": not a PEM certificate/ },
    { what: 'a key file that is not PEM', cert: 'good', key: 'junk', message: /^--tls-key-file ".*tls\.key": not a PEM private key/ },
    { what: "another pair's key", cert: 'good', key: 'other', message: /^--tls-key-file ".*tls\.key" is not the key of the certificate in --tls-cert-file/ },
    { what: 'a missing certificate file', cert: 'missing', key: 'good', message: /^--tls-cert-file ".*tls\.crt": cannot read it \(ENOENT\)/ },
  ])('refuses $what, naming it', async ({ cert, key, message }) => {
    const dir = tmpDir();
    const [good, other] = [await pair(), await pair()];
    const files = { cert: path.join(dir, 'tls.crt'), key: path.join(dir, 'tls.key') };
    const pem = { good: { cert: good.cert, key: good.key }, other: { cert: other.cert, key: other.key }, junk: { cert: 'junk', key: 'junk' } } as const;
    if (cert !== 'missing') writeFileSync(files.cert, pem[cert as keyof typeof pem].cert);
    writeFileSync(files.key, pem[key as keyof typeof pem].key);
    const cfg = parseWebhookConfig(['--listen=127.0.0.1:0', '--health-addr=127.0.0.1:0', `--tls-cert-file=${files.cert}`, `--tls-key-file=${files.key}`], {});
    await expect(startWebhook(cfg, memoryLogger().log)).rejects.toThrow(message);
  });

  it('refuses one file without the other', () => {
    expect(() => parseWebhookConfig(['--tls-cert-file=/x'], {})).toThrow(/go together/);
  });
});
