// KubeApiClient over real TLS against a local server that misbehaves: a plain request's
// whole answer is bounded, watches never wait behind plain requests for a socket, and a
// connection the server accepted but does not serve is given up after its handshake deadline.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generatePki } from '../../../localcluster/controlplane/certs.ts';
import { KubeApiClient, type ClientOptions } from '../../../agent/kube/client.ts';
import { waitFor } from '../../../localcluster/wait.ts';
import { startFaultProxy, type FaultProxy } from '../../support/proxy.ts';

let pki: Awaited<ReturnType<typeof generatePki>>;
const dir = mkdtempSync(path.join(os.tmpdir(), 'kube-client-'));
beforeAll(async () => { pki = await generatePki(path.join(dir, 'pki')); }, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cleanup: (() => void)[] = [];
afterEach(() => { for (const c of cleanup.splice(0)) c(); });

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void, opts: ClientOptions = {}) {
  return (await serveBehindProxy(handler, opts, false)).client;
}

/** The server behind a fault proxy (which can hold new connections, as a starting kube-apiserver does). */
async function serveBehindProxy(handler: (req: IncomingMessage, res: ServerResponse) => void, opts: ClientOptions = {}, proxied = true) {
  const server = https.createServer({ cert: readFileSync(pki.serving.cert), key: readFileSync(pki.serving.key) }, handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const proxy: FaultProxy | undefined = proxied ? await startFaultProxy(port) : undefined;
  const ca = readFileSync(pki.caCert);
  const client = new KubeApiClient({
    getCurrentCluster: () => ({ server: `https://${proxy?.address ?? `127.0.0.1:${port}`}` }),
    async applyToHTTPSOptions(o) { o.ca = ca; },
  }, () => {}, opts);
  cleanup.push(() => { client.close(); void proxy?.close(); server.closeAllConnections(); server.close(); });
  return { client, proxy: proxy! };
}

const answer = (_req: IncomingMessage, res: ServerResponse) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}');
};

/** What a request ended with: the error's code and message, or "answered". */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'answered';
  } catch (err) {
    return `${(err as { code?: string }).code}: ${(err as Error).message}`;
  }
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

  describe('a connection the server accepted but does not serve (a kube-apiserver still starting)', () => {
    const late = (proxy: FaultProxy, ms: number) => `ETIMEDOUT: ${proxy.address} did not finish a TLS handshake within ${ms} ms of connecting`;
    /** The deadline a timed-out request was given, from its message. */
    const deadlineOf = (o: string) => Number(/within (\d+) ms of connecting$/.exec(o)?.[1] ?? NaN);
    /** The deadline the next new connection gets: held, after the kept-alive one is dropped. */
    async function nextDeadline(proxy: FaultProxy, list: () => Promise<string>): Promise<number> {
      proxy.hold();
      proxy.cut();
      // A request sent before the client saw that close fails on the dead socket, as with any server.
      let next = await list();
      for (let i = 0; i < 3 && next === 'ECONNRESET: socket hang up'; i++) next = await list();
      return deadlineOf(next);
    }

    it.each([
      ['a watch', (c: KubeApiClient) => c.stream('/api/v1/pods?watch=true', new AbortController().signal)],
      ['a plain request', (c: KubeApiClient) => c.json('GET', '/api/v1/pods')],
    ])('gives up on %s once its TLS handshake has not finished within the deadline, says so, and closes the connection', async (_what, call) => {
      const told: number[] = [];
      const { client, proxy } = await serveBehindProxy(answer, { handshake: { initialMs: 200, maxMs: 1_000 }, handshakeTimedOut: (ms) => told.push(ms) });
      proxy.hold();
      expect(await outcome(call(client))).toBe(late(proxy, 200));
      expect(told).toEqual([200]);
      // Closed by the client, not left for the server to find when it starts serving.
      await waitFor(() => proxy.abandoned === 1 && proxy.held === 0, { timeoutMs: 5_000, describe: 'the held connection closed by the client' });
    });

    it('doubles the deadline after each handshake that did not finish, up to its cap, and lowers it again after one that finished at once', async () => {
      // The cap leaves a real handshake on a loaded machine room to finish after the release.
      const { client, proxy } = await serveBehindProxy(answer, { handshake: { initialMs: 100, maxMs: 800 } });
      const list = () => outcome(client.json('GET', '/api/v1/pods'));
      proxy.hold();
      const held = [await list(), await list(), await list(), await list(), await list()];
      expect(held).toEqual([late(proxy, 100), late(proxy, 200), late(proxy, 400), late(proxy, 800), late(proxy, 800)]);
      proxy.release();
      expect(await list()).toBe('answered');
      // Twice what that handshake took, at least the initial deadline: below the cap for any
      // loopback handshake under 400 ms.
      const next = await nextDeadline(proxy, list);
      expect(next).toBeGreaterThanOrEqual(100);
      expect(next).toBeLessThan(800);
    });

    it('gives the next connection twice the time a handshake that finished slowly took', async () => {
      const { client, proxy } = await serveBehindProxy(answer, { handshake: { initialMs: 1_000, maxMs: 5_000 } });
      const list = () => outcome(client.json('GET', '/api/v1/pods'));
      proxy.hold();
      const pending = list();
      await waitFor(() => proxy.held === 1, { timeoutMs: 5_000, describe: 'the connection held' });
      await new Promise((r) => setTimeout(r, 600));
      proxy.release(); // its handshake finishes 600 ms or more after it connected
      expect(await pending).toBe('answered');
      const next = await nextDeadline(proxy, list);
      expect(next).toBeGreaterThanOrEqual(1_200);
      expect(next).toBeLessThanOrEqual(5_000);
    });

    it('serves the request the server answers once it starts serving within the deadline', async () => {
      const { client, proxy } = await serveBehindProxy(answer, { handshake: { initialMs: 5_000, maxMs: 5_000 } });
      proxy.hold();
      const pending = outcome(client.json('GET', '/api/v1/pods'));
      await waitFor(() => proxy.held === 1, { timeoutMs: 5_000, describe: 'the connection held' });
      expect(proxy.release()).toBe(1);
      expect(await pending).toBe('answered');
    });

    it('bounds the handshake only: an answer slower than the deadline, on a new connection or a kept-alive one, is waited for', async () => {
      const client = await serve((req, res) => setTimeout(() => answer(req, res), 1_200), { handshake: { initialMs: 500, maxMs: 500 } });
      expect(await outcome(client.json('GET', '/api/v1/pods'))).toBe('answered');
      expect(await outcome(client.json('GET', '/api/v1/pods'))).toBe('answered');
    });

    it('bounds each connection once: requests queued for a kept-alive socket are never timed by it', async () => {
      // One more than the plain requests' sockets: the last waits for a socket already in use.
      const client = await serve((req, res) => setTimeout(() => answer(req, res), 1_500), { handshake: { initialMs: 1_000, maxMs: 1_000 } });
      const all = await Promise.all(Array.from({ length: 9 }, () => outcome(client.json('GET', '/api/v1/pods'))));
      expect(all).toEqual(Array(9).fill('answered'));
    });

    it('does not fail a handshake whose answer arrived while the event loop was busy past the deadline', async () => {
      // The server, behind a proxy that forwards each connection 100 ms after it came, runs
      // in a worker thread: it answers while this thread is busy.
      const worker = new Worker(`
        const { workerData, parentPort } = require('node:worker_threads');
        const https = require('node:https');
        const net = require('node:net');
        const server = https.createServer({ cert: workerData.cert, key: workerData.key }, (q, r) => r.end('{"items":[]}'));
        server.listen(0, '127.0.0.1', () => {
          const proxy = net.createServer((c) => {
            c.pause();
            setTimeout(() => { const u = net.connect(server.address().port, '127.0.0.1'); c.pipe(u); u.pipe(c); c.resume(); }, 100);
          });
          proxy.listen(0, '127.0.0.1', () => parentPort.postMessage(proxy.address().port));
        });`, { eval: true, workerData: { cert: readFileSync(pki.serving.cert, 'utf8'), key: readFileSync(pki.serving.key, 'utf8') } });
      cleanup.push(() => void worker.terminate());
      const port = await new Promise<number>((r) => worker.once('message', r));
      const ca = readFileSync(pki.caCert);
      const client = new KubeApiClient({
        getCurrentCluster: () => ({ server: `https://127.0.0.1:${port}` }),
        async applyToHTTPSOptions(o) { o.ca = ca; },
      }, () => {}, { handshake: { initialMs: 200, maxMs: 200 } });
      cleanup.push(() => client.close());
      const pending = outcome(client.json('GET', '/api/v1/pods'));
      await new Promise((r) => setTimeout(r, 30)); // connected, the deadline armed, the hello sent
      // Busy from the check phase until well past the deadline: the next turn of the loop
      // runs the deadline's timer before it reads the server's answer, waiting since ~100 ms.
      await new Promise<void>((r) => setImmediate(() => {
        const until = performance.now() + 700;
        while (performance.now() < until) { /* the event loop is busy */ }
        r();
      }));
      expect(await pending).toBe('answered');
    });
  });
});
