// The webhook's HTTPS endpoint: POST /mutate with an AdmissionReview.
//
// Bounded: a body over MAX_BODY_BYTES is cut off with 413, a request must arrive whole
// within REQUEST_TIMEOUT_MS, and the headers within HEADERS_TIMEOUT_MS. A body that is not
// an AdmissionReview is answered 400 with the reason; one that is, but is malformed inside,
// gets a review that denies with the reason (the API server shows it to the user). The TLS
// material is swapped in place (setSecureContext) when the certificate rotates.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { clip } from '../common/validation.ts';
import { F } from '../monitoring/logfields.ts';
import { admit, isServed, parseReview, responseFor, reviewOf, ReviewError } from './review.ts';

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
  /** `kind`: a served kind, 'other', or '' when the request was not read; `seconds` unset when it never became a review (a timeout, a parse error). */
  (result: 'mutated' | 'unchanged' | 'denied' | 'malformed' | 'error', kind: string, seconds?: number): void;
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
    const done = (result: Result, kind: string) => observe(result, kind, Number(process.hrtime.bigint() - started) / 1e9);
    readBody(req).then((body) => {
      if (body === undefined) {
        opts.log.warn({ [F.reason]: 'TooLarge' }, `request body over ${MAX_BODY_BYTES} bytes`);
        done('malformed', '');
        // The rest of the body is never read, so the connection cannot carry another request.
        return reply(res, 413, `request body over ${MAX_BODY_BYTES} bytes\n`, undefined, true);
      }
      handle(body, res, opts.log, done);
    }, () => res.destroy());
  });
  // A request that times out or does not parse: counted and logged like a malformed review,
  // then answered as Node would (with a listener, Node leaves the answer to us).
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large'
      : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW' ? '413 Payload Too Large' : '400 Bad Request';
    opts.log.warn({ [F.reason]: 'ClientError', [F.err]: clip(`${err.code ?? 'error'}: ${err.message}`, MAX_FIELD) }, `answered ${status}`);
    observe('malformed', '');
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
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

type Result = 'mutated' | 'unchanged' | 'denied' | 'malformed' | 'error';

/** Strings from the request in a log line are cut at this, so no request makes a line of megabytes. */
const MAX_FIELD = 1024;

function handle(body: string, res: ServerResponse, log: Logger, done: (result: Result, kind: string) => void): void {
  let req;
  try {
    req = parseReview(body);
  } catch (err) {
    if (!(err instanceof ReviewError)) return failed(err, undefined, res, log, done);
    log.warn({ [F.reason]: 'MalformedReview', [F.err]: clip(err.message, MAX_FIELD) }, 'malformed AdmissionReview');
    done('malformed', '');
    if (err.uid === undefined) return reply(res, 400, `not an AdmissionReview: ${clip(err.message, MAX_FIELD)}\n`);
    return reply(res, 200, reviewOf({ uid: err.uid, allowed: false, status: { code: 400, message: `malformed AdmissionReview: ${clip(err.message, MAX_FIELD)}` } }), 'application/json');
  }
  // Only served kinds become a metric label: any string can arrive here.
  const kind = isServed(req.kind) ? req.kind.kind : 'other';
  let m;
  try {
    m = admit(req);
  } catch (err) {
    return failed(err, req.uid, res, log, done, kind);
  }
  const what = { [F.kind]: clip(req.kind.kind, 63), [F.object]: clip(`${req.namespace ?? ''}/${req.name ?? ''}`, 320), [F.operation]: clip(req.operation, 16) };
  if (!m.allowed) {
    log.warn({ ...what, [F.reason]: 'Denied', [F.err]: m.message }, 'denied');
    done('denied', kind);
  } else if (m.patch.length > 0) {
    log.info({ ...what, [F.changed]: m.changed.slice(0, 20) }, 'rewrote metadata.ownerReferences fields');
    done('mutated', kind);
  } else {
    done('unchanged', kind);
  }
  reply(res, 200, reviewOf(responseFor(req.uid, m)), 'application/json');
}

/**
 * A request the webhook could not process (a value nested deep enough to overflow the
 * stack, a bug): one log line, and a denial the user sees, never a crash of the process
 * that serves every other review. Denied, not allowed: only objects that use the KEP
 * syntax reach the webhook, and the API server would refuse those unrewritten anyway.
 */
function failed(err: unknown, uid: string | undefined, res: ServerResponse, log: Logger, done: (result: Result, kind: string) => void, kind = ''): void {
  const message = clip(err instanceof Error ? `${err.name}: ${err.message}` : String(err), 256);
  log.error({ [F.reason]: 'InternalError', [F.err]: message }, 'could not process the review');
  done('error', kind);
  if (uid === undefined) return reply(res, 500, `the webhook could not process this request: ${message}\n`);
  reply(res, 200, reviewOf({ uid, allowed: false, status: { code: 500, message: `ownerrefs.dev could not process this object (${message}); nothing was changed` } }), 'application/json');
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

function reply(res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8', close = false): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), ...(close ? { Connection: 'close' } : {}) });
  res.end(body);
}
