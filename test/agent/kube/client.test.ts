// KubeApiClient over real TLS against a local server that misbehaves: a plain request's
// whole answer is bounded, and watches never wait behind plain requests for a socket.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generatePki } from '../../../localcluster/controlplane/certs.ts';
import { KubeApiClient } from '../../../agent/kube/client.ts';

let pki: Awaited<ReturnType<typeof generatePki>>;
const dir = mkdtempSync(path.join(os.tmpdir(), 'kube-client-'));
beforeAll(async () => { pki = await generatePki(path.join(dir, 'pki')); }, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cleanup: (() => void)[] = [];
afterEach(() => { for (const c of cleanup.splice(0)) c(); });

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void, opts: { deadlineMs?: number } = {}) {
  const server = https.createServer({ cert: readFileSync(pki.serving.cert), key: readFileSync(pki.serving.key) }, handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const ca = readFileSync(pki.caCert);
  const client = new KubeApiClient({
    getCurrentCluster: () => ({ server: `https://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    async applyToHTTPSOptions(o) { o.ca = ca; },
  }, () => {}, opts);
  cleanup.push(() => { client.close(); server.closeAllConnections(); server.close(); });
  return client;
}

describe('KubeApiClient', () => {
  it('fails a plain request whose body trickles without end, once its deadline passes (the idle bound never trips)', async () => {
    const client = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"items":[');
      const t = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(t));
    }, { deadlineMs: 500 });
    const err = await client.json('GET', '/api/v1/pods?x=1').catch((e: unknown) => e) as Error & { code?: string };
    expect(err.code).toBe('ETIMEDOUT');
    expect(err.message).toBe('GET /api/v1/pods was not answered whole within 500 ms');
  });

  it('opens a watch at once while every socket for plain requests is held by requests that hang', async () => {
    const client = await serve((req, res) => {
      if (!req.url!.includes('watch=true')) return; // plain requests hang
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2"}}}\n');
    });
    const hung = Array.from({ length: 12 }, (_, i) => client.json('GET', `/apis/apps/v1/namespaces/ns/replicasets/rs-${i}`).catch(() => undefined));
    const ac = new AbortController();
    cleanup.push(() => ac.abort());
    const res = await client.stream('/api/v1/pods?watch=true', ac.signal);
    expect(res.statusCode).toBe(200);
    const first = await new Promise<string>((r) => res.once('data', (d: Buffer) => r(d.toString())));
    expect(first).toContain('BOOKMARK');
    void hung;
  });
});
