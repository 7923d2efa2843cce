import { once } from 'node:events';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError, type ApiClient } from '../../../../agent/kube/client.ts';
import { ensureServingTls } from '../../../../agent/admission/webhook/certs.ts';
import { MAX_BODY_BYTES, startWebhookServer, type WebhookServer } from '../../../../agent/admission/webhook/server.ts';
import { memoryLogger } from '../../../support/agentkit.ts';
import { kepPod } from '../../../support/podspecs.ts';

/** A Secret store that starts empty: each call to ensureServingTls with a fresh one makes a new CA. */
function store(): ApiClient {
  let secret: unknown;
  return {
    async json<T>(method: string, _path: string, body?: unknown): Promise<T> {
      if (method === 'GET') {
        if (!secret) throw new ApiError(404, 'NotFound', 'not found');
        return secret as T;
      }
      secret = { ...(body as object), metadata: { resourceVersion: '1' } };
      return secret as T;
    },
    stream: () => Promise.reject(new Error('no')),
  };
}

const OPTS = { namespace: 'ns', secretName: 's', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] };
let server: WebhookServer;
let port: number;
let ca: string;
const seen: string[] = [];
const kinds: string[] = [];
const reasons: (string | undefined)[] = [];
const logged = memoryLogger();

function post(body: string | Buffer, opts: { path?: string; method?: string; ca?: string; slow?: boolean; chunked?: boolean; port?: number; agent?: https.Agent } = {}): Promise<{ status: number; body: string; connection?: string }> {
  return new Promise((resolve, reject) => {
    // A new connection each time (agent: false) unless an agent is given: a rotation applies to new connections.
    const req = https.request({ agent: opts.agent ?? false, host: '127.0.0.1', port: opts.port ?? port, path: opts.path ?? '/mutate', method: opts.method ?? 'POST', ca: opts.ca ?? ca,
      headers: { 'Content-Type': 'application/json', ...(opts.chunked ? {} : { 'Content-Length': Buffer.byteLength(body) }) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), connection: res.headers.connection }));
    });
    req.on('error', reject);
    if (opts.slow) req.write(body.slice(0, 10)); // and never finish
    else if (opts.chunked) req.write(body, () => req.end()); // written before end: Node sends it chunked
    else req.end(body);
  });
}

beforeAll(async () => {
  const t = await ensureServingTls(store(), OPTS);
  ca = t.caBundle;
  server = await startWebhookServer({ host: '127.0.0.1', port: 0, tls: t, log: logged.log, requestTimeoutMs: 1_000, observe: (r, k, _s, reason) => { seen.push(r); kinds.push(k); reasons.push(reason); } });
  port = (server.server.address() as { port: number }).port;
});
afterAll(() => server.close());

describe('the webhook endpoint', () => {
  it('answers an AdmissionReview with its patch', async () => {
    const r = await post(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
      request: { uid: 'abc', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object: kepPod() } }));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'abc', allowed: true, patchType: 'JSONPatch' } });
    expect(seen.at(-1)).toBe('mutated');
  });

  it('counts a denied object with its reason', async () => {
    const owners = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'u', controller: true }];
    const pod = { ...kepPod(), metadata: { name: 'big', namespace: 'ns', ownerReferences: owners, annotations: { big: 'x'.repeat(300 * 1024) } } };
    const r = await post(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
      request: { uid: 'den', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace: 'ns', object: pod } }));
    expect(JSON.parse(r.body).response).toMatchObject({ uid: 'den', allowed: false, status: { code: 422 } });
    expect([seen.at(-1), reasons.at(-1)]).toEqual(['denied', 'AnnotationsTooLarge']);
  });

  it('answers a body that is not a review with 400 and the reason', async () => {
    expect(await post('{nope')).toMatchObject({ status: 400, body: expect.stringMatching(/^not an AdmissionReview: the body is not JSON/) });
    expect(seen.at(-1)).toBe('malformed');
  });

  it('denies a review that is malformed inside, with its uid', async () => {
    const r = await post(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u2', kind: 'Pod' } }));
    expect(JSON.parse(r.body).response).toEqual({ uid: 'u2', allowed: false, status: { code: 400, message: expect.stringMatching(/malformed AdmissionReview: request.kind/) } });
  });

  it('cuts off a body over the limit with 413 and closes the connection (the rest is never read), counted and logged', async () => {
    const lines = logged.lines.length;
    expect(await post(Buffer.alloc(MAX_BODY_BYTES + 1, 0x20))).toMatchObject({ status: 413, connection: 'close' });
    expect(seen.at(-1)).toBe('malformed');
    expect(logged.lines.slice(lines).map((l) => l.reason)).toEqual(['TooLarge']);
  });

  it('answers 408 to a request whose body does not arrive in time, counted and logged, and keeps serving', async () => {
    const lines = logged.lines.length;
    expect((await post('{"apiVersion":"admission.k8s.io/v1"', { slow: true })).status).toBe(408);
    expect(seen.at(-1)).toBe('malformed');
    expect(logged.lines.slice(lines).map((l) => l.reason)).toEqual(['ClientError']);
    expect((await post('{}')).status).toBe(400);
  });

  // Hostile reviews: the answer is a review (or a 4xx), one log line, and the process serves on.
  // Nesting past the bound is refused before the kind is read (kind ''). nested(n) stands for an array n deep, spliced in as text (JSON.stringify would overflow here too).
  const nested = (depth: number) => `<nested ${depth}>`;
  const review = (request: object) => JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'h1', operation: 'CREATE', ...request } })
    .replace(/"<nested (\d+)>"/g, (_m, d: string) => `${'['.repeat(Number(d))}"x"${']'.repeat(Number(d))}`);
  const pod = { kind: { group: '', version: 'v1', kind: 'Pod' } };
  const owners = { path: 'o', fieldRef: { fieldPath: 'metadata.ownerReferences' } };
  it.each([
    { what: 'a group named like an Object property', request: { kind: { group: 'constructor', version: 'v1', kind: 'Pod' }, object: kepPod() }, allowed: true, kind: 'other' },
    { what: 'a group named __proto__', request: { kind: { group: '__proto__', version: 'v1', kind: 'Pod' }, object: kepPod() }, allowed: true, kind: 'other' },
    { what: 'an unserved kind (never a metric label of its own)', request: { kind: { group: 'x', version: 'v1', kind: 'K'.repeat(10_000) }, object: {} }, allowed: true, kind: 'other' },
    { what: 'a name nested 5,000 deep', request: { ...pod, object: { ...kepPod(), metadata: { name: nested(5_000) } } },
      allowed: false, kind: '', code: 400, message: /^malformed AdmissionReview: request\.object\.metadata\.name\[0\]\[0\].*nested deeper than 100 levels/ },
    { what: 'a downwardAPI item nested 200,000 deep', request: { ...pod, object: kepPod({ containers: [{ name: 'c' }], volumes: [{ name: 'v', downwardAPI: { items: [owners, nested(200_000)] } }] } as never) },
      allowed: false, kind: '', code: 400, message: /^malformed AdmissionReview: request\.object\.spec\.volumes\[0\]\.downwardAPI\.items\[1\]\[0\].*\(100 levels\): nested deeper than 100/ },
    { what: 'a field nested 200,000 deep beside the items', request: { ...pod, object: kepPod({ containers: [{ name: 'c' }], volumes: [{ name: 'v', downwardAPI: { items: [owners], x: nested(200_000) } }] } as never) },
      allowed: false, kind: '', code: 400, message: /^malformed AdmissionReview: request\.object\.spec\.volumes\[0\]\.downwardAPI\.x\[0\]/ },
    { what: 'a Pod CREATE without its object', request: { ...pod }, allowed: false, kind: 'Pod', code: 400, message: /^malformed AdmissionReview: request\.object is missing: a CREATE of a Pod carries the object/ },
    { what: 'a Pod CREATE whose object is null', request: { ...pod, object: null }, allowed: false, kind: 'Pod', code: 400, message: /request\.object is null/ },
  ])('answers $what with a review, and serves on', async ({ request, allowed, kind, code, message }) => {
    const r = await post(review(request));
    expect(r.status).toBe(200);
    const response = JSON.parse(r.body).response;
    expect(response).toMatchObject({ uid: 'h1', allowed });
    if (code !== undefined) expect(response.status).toMatchObject({ code, message: expect.stringMatching(message!) });
    expect(kinds.at(-1)).toBe(kind);
    expect((await post('{}')).status).toBe(400);
  });

  it('answers 411 to a body without a Content-Length (chunked: one buffer per chunk would be kept), and closes the connection', async () => {
    const lines = logged.lines.length;
    expect(await post('{}', { chunked: true })).toMatchObject({ status: 411, connection: 'close' });
    expect(seen.at(-1)).toBe('malformed');
    expect(logged.lines.slice(lines).map((l) => l.reason)).toEqual(['LengthRequired']);
  });

  it('answers 503 while the bodies being read hold MAX_BUFFERED_BYTES, and takes requests again once they are read', async () => {
    const t = await ensureServingTls(store(), OPTS);
    const busy = await startWebhookServer({ host: '127.0.0.1', port: 0, tls: t, log: memoryLogger().log, requestTimeoutMs: 1_000, maxBufferedBytes: 1_000 });
    try {
      const at = { port: (busy.server.address() as { port: number }).port, ca: t.caBundle };
      const held = post('x'.repeat(900), { ...at, slow: true }); // declares 900 bytes, sends 10
      await new Promise((r) => setTimeout(r, 100));
      expect(await post('y'.repeat(200), at)).toMatchObject({ status: 503, body: expect.stringMatching(/hold 1000 bytes already/) });
      expect((await held).status).toBe(408); // its 900 bytes are given back
      for (let i = 0; i < 3; i++) expect((await post(`{"${'z'.repeat(800)}":1}`, at)).status).toBe(400); // read, not refused
    } finally {
      await busy.close();
    }
  });

  it('charges what bodies sent, not what they declared, and frees it from a client that keeps its half open after the 408', async () => {
    const t = await ensureServingTls(store(), OPTS);
    const busy = await startWebhookServer({ host: '127.0.0.1', port: 0, tls: t, log: memoryLogger().log, requestTimeoutMs: 1_000, maxBufferedBytes: 60_000 });
    const hostile: tls.TLSSocket[] = [];
    try {
      const at = { port: (busy.server.address() as { port: number }).port, ca: t.caBundle };
      const answers: string[] = [];
      for (let i = 0; i < 3; i++) { // each declares 4 MiB, sends a byte and more now and then, and never closes
        const s = tls.connect({ host: '127.0.0.1', port: at.port, ca: t.caBundle, allowHalfOpen: true } as tls.ConnectionOptions);
        s.on('error', () => {});
        s.on('data', (d: Buffer) => answers.push(d.toString().split('\r\n')[0]!));
        hostile.push(s);
        await once(s, 'secureConnect');
        s.write(`POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: ${MAX_BODY_BYTES}\r\n\r\n{`);
      }
      const trickle = setInterval(() => { for (const s of hostile) if (!s.destroyed) s.write(' '); }, 200);
      try {
        await new Promise((r) => setTimeout(r, 100));
        expect((await post('{}', at)).status).toBe(400); // 3 x 16 KiB buffered, far under the bound: served
        await vi.waitFor(() => expect(answers).toEqual(Array(3).fill('HTTP/1.1 408 Request Timeout')), { timeout: 5_000 });
        await vi.waitFor(() => expect(hostile.every((s) => s.destroyed || s.readableEnded)).toBe(true), { timeout: 5_000 });
        for (let i = 0; i < 3; i++) expect((await post(`{"${'z'.repeat(50_000)}":1}`, at)).status).toBe(400); // 50 KB each: nothing left held
      } finally {
        clearInterval(trickle);
      }
    } finally {
      for (const s of hostile) s.destroy();
      await busy.close();
    }
  });

  it('closes a connection that never finishes its TLS handshake or never sends a request', async () => {
    const t = await ensureServingTls(store(), OPTS);
    const quiet = await startWebhookServer({ host: '127.0.0.1', port: 0, tls: t, log: memoryLogger().log, idleTimeoutMs: 200, handshakeTimeoutMs: 300 });
    try {
      const p = (quiet.server.address() as { port: number }).port;
      const raw = net.connect(p, '127.0.0.1'); // not even a ClientHello
      raw.on('error', () => {});
      const secure = tls.connect({ host: '127.0.0.1', port: p, ca: t.caBundle }); // TLS, then nothing
      secure.on('error', () => {});
      await Promise.all([once(raw, 'close'), once(secure, 'close')]);
    } finally {
      await quiet.close();
    }
  });

  it('admits a pod whose chain could not be read with admission\'s own values (Pending, for the agent to fill in), and logs why', async () => {
    const t = await ensureServingTls(store(), OPTS);
    const log = memoryLogger();
    const failing = await startWebhookServer({ host: '127.0.0.1', port: 0, tls: t, log: log.log, chains: () => Promise.reject(new Error('owner cache closed')) });
    try {
      const spec = { containers: [{ name: 'app', env: [{ name: 'W', valueFrom: { fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/workload-name']" } } }] }] };
      const r = await post(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
        request: { uid: 'c1', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace: 'default', object: kepPod(spec as never) } }),
      { port: (failing.server.address() as { port: number }).port, ca: t.caBundle });
      const response = JSON.parse(r.body).response;
      expect(response).toMatchObject({ uid: 'c1', allowed: true, patchType: 'JSONPatch' });
      expect(JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8'))).toEqual([{ op: 'add', path: '/metadata/annotations', value: { 'ownerrefs.dev/workload-name': '(unresolved: Pending)' } }]);
      expect(log.lines.filter((l) => l.reason === 'ChainFailed')).toEqual([expect.objectContaining({ object: 'default/', err: 'Error: owner cache closed' })]);
    } finally {
      await failing.close();
    }
  });

  it('after drain() still answers every review, each answer closing its connection (a client holding pooled connections opens its next one elsewhere)', async () => {
    const t = await ensureServingTls(store(), OPTS);
    const s = await startWebhookServer({ host: '127.0.0.1', port: 0, tls: t, log: memoryLogger().log, observe: () => {} });
    const agent = new https.Agent({ keepAlive: true }); // as the API server's client: connections reused
    const opts = { port: (s.server.address() as { port: number }).port, ca: t.caBundle, agent };
    const review = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
      request: { uid: 'd', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object: kepPod() } });
    try {
      expect(await post(review, opts)).toMatchObject({ status: 200, connection: 'keep-alive' });
      s.drain();
      for (let i = 0; i < 2; i++) expect(await post(review, opts)).toMatchObject({ status: 200, connection: 'close', body: expect.stringContaining('"allowed":true') });
    } finally {
      agent.destroy();
      await s.close();
    }
  });

  it('serves only POST /mutate', async () => {
    expect((await post('', { path: '/other' })).status).toBe(404);
    expect((await post('', { method: 'PUT' })).status).toBe(405);
  });

  it('swaps the certificate in place when it rotates (new connections get the new one)', async () => {
    const next = await ensureServingTls(store(), OPTS); // a new CA
    server.setTls(next);
    await expect(post('{}')).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);
    expect((await post('{}', { ca: next.caBundle })).status).toBe(400);
    ca = next.caBundle;
  });

  it('speaks TLS 1.2 or later only', async () => {
    const err = await new Promise<Error | undefined>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, ca, maxVersion: 'TLSv1.1', minVersion: 'TLSv1' }, () => resolve(undefined));
      s.on('error', resolve);
    });
    expect(err?.message).toMatch(/protocol|version|alert/i);
  });
});
