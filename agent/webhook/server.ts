// The webhook's HTTPS endpoint: POST /mutate with an AdmissionReview.
//
// Bounded: a body over MAX_BODY_BYTES is cut off with 413, a request must arrive whole
// within REQUEST_TIMEOUT_MS, and the headers within HEADERS_TIMEOUT_MS. A body that is not
// an AdmissionReview is answered 400 with the reason; one that is, but is malformed inside,
// gets a review that denies with the reason (the API server shows it to the user). The TLS
// material is swapped in place (setSecureContext) when the certificate rotates.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import type { Logger } from 'pino';
import { F } from '../monitoring/logfields.ts';
import { admit, parseReview, responseFor, reviewOf, ReviewError } from './review.ts';

const { createServer } = process.getBuiltinModule('node:https');

/** The API server's own limit on a request body is 3 MiB; a review wraps one object. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
export const REQUEST_TIMEOUT_MS = 10_000;
export const HEADERS_TIMEOUT_MS = 5_000;

export interface TlsMaterial {
  cert: string;
  key: string;
}

export interface WebhookObserver {
  (result: 'mutated' | 'unchanged' | 'denied' | 'malformed', kind: string, seconds: number): void;
}

export interface WebhookServer {
  server: Server;
  setTls(tls: TlsMaterial): void;
  close(): Promise<void>;
}

export function startWebhookServer(opts: {
  host: string; port: number; tls: TlsMaterial; log: Logger; observe?: WebhookObserver;
  /** Default REQUEST_TIMEOUT_MS; tests shorten it. */
  requestTimeoutMs?: number;
}): Promise<WebhookServer> {
  const observe = opts.observe ?? (() => {});
  const requestTimeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // Node checks the timeouts every connectionsCheckingInterval (30 s by default): often enough here.
  const server = createServer({ cert: opts.tls.cert, key: opts.tls.key, minVersion: 'TLSv1.2', connectionsCheckingInterval: Math.min(1_000, requestTimeout / 2) }, (req, res) => {
    if (req.url?.split('?')[0] !== '/mutate') return reply(res, 404, 'not found: POST AdmissionReviews to /mutate\n');
    if (req.method !== 'POST') return reply(res, 405, 'method not allowed: POST an AdmissionReview\n');
    const started = process.hrtime.bigint();
    readBody(req).then((body) => {
      if (body === undefined) return reply(res, 413, `request body over ${MAX_BODY_BYTES} bytes\n`);
      handle(body, res, opts.log, (result, kind) => observe(result, kind, Number(process.hrtime.bigint() - started) / 1e9));
    }, () => res.destroy());
  });
  server.requestTimeout = requestTimeout;
  server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, server.requestTimeout);
  server.keepAliveTimeout = 30_000; // the API server reuses connections
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve({
        server,
        setTls: (tls) => server.setSecureContext({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }),
        close: () => new Promise<void>((done) => {
          server.close(() => done());
          server.closeIdleConnections();
        }),
      });
    });
  });
}

function handle(body: string, res: ServerResponse, log: Logger, done: (result: 'mutated' | 'unchanged' | 'denied' | 'malformed', kind: string) => void): void {
  let req;
  try {
    req = parseReview(body);
  } catch (err) {
    const e = err as ReviewError;
    log.warn({ [F.reason]: 'MalformedReview', [F.err]: e.message }, 'malformed AdmissionReview');
    done('malformed', '');
    if (e.uid === undefined) return reply(res, 400, `not an AdmissionReview: ${e.message}\n`);
    return reply(res, 200, reviewOf({ uid: e.uid, allowed: false, status: { code: 400, message: `malformed AdmissionReview: ${e.message}` } }), 'application/json');
  }
  const m = admit(req);
  const what = { [F.kind]: req.kind.kind, [F.object]: `${req.namespace ?? ''}/${req.name ?? ''}`, [F.operation]: req.operation };
  if (!m.allowed) {
    log.warn({ ...what, [F.reason]: 'Denied', [F.err]: m.message }, 'denied');
    done('denied', req.kind.kind);
  } else if (m.patch.length > 0) {
    log.info({ ...what, [F.changed]: m.changed }, 'rewrote metadata.ownerReferences fields');
    done('mutated', req.kind.kind);
  } else {
    done('unchanged', req.kind.kind);
  }
  reply(res, 200, reviewOf(responseFor(req.uid, m)), 'application/json');
}

/** The body as text, or undefined once it passes MAX_BODY_BYTES (the rest is not read). */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_BODY_BYTES) return resolve(undefined);
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners('data');
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function reply(res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
