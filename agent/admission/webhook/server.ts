// The webhook's HTTPS endpoint: POST /mutate with an AdmissionReview.
//
// Bounded, since anything in the cluster network may connect: a body must declare its
// Content-Length (411 otherwise; the API server always does), over MAX_BODY_BYTES it is
// refused with 413; it is read into one buffer that grows as bytes arrive (chunks are not
// kept: a body in one-byte chunks took 1.9 GB), and past MAX_BUFFERED_BYTES in the buffers
// of all bodies being read it is refused with 503 (bytes that came, not bytes declared: a
// declaration costs nothing).
// A request must arrive whole within REQUEST_TIMEOUT_MS, and the headers within
// HEADERS_TIMEOUT_MS; a TLS handshake within HANDSHAKE_TIMEOUT_MS; a connection quiet for
// IDLE_TIMEOUT_MS is closed, and at most MAX_CONNECTIONS are open. A body that is not
// an AdmissionReview is answered 400 with the reason; one that is, but is malformed inside,
// gets a review that denies with the reason (the API server shows it to the user). The TLS
// material is swapped in place (setSecureContext) when the certificate rotates.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ByteBudget } from '../../common/budget.ts';
import { clip } from '../../common/validation.ts';
import { F } from '../../monitoring/logfields.ts';
import type { ControllerChain, OwnerReference } from '../../../projections/index.ts';
import { MUTATE_PATH } from '../../../projections/names.ts';
import { admit, isServed, parseReview, plan, responseFor, reviewOf, ReviewError, type AdmissionRequest } from './review.ts';
import type { DenialReason } from './objects.ts';

const { createServer } = process.getBuiltinModule('node:https');

/** The API server's own limit on a request body is 3 MiB; a review wraps one object. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
export const REQUEST_TIMEOUT_MS = 10_000;
export const HEADERS_TIMEOUT_MS = 5_000;
/** Bodies being read at once, together: eight of the largest, thousands of the usual few KiB. */
export const MAX_BUFFERED_BYTES = 8 * MAX_BODY_BYTES;
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/** A connection that never sends a request is closed after this (one idle between requests, at keepAliveTimeout). */
export const IDLE_TIMEOUT_MS = 60_000;
/** Each open TLS connection costs about 55 KiB: a thousand stay well inside the pod's memory limit. */
export const MAX_CONNECTIONS = 1_000;

export interface TlsMaterial {
  cert: string;
  key: string;
}

export interface WebhookObserver {
  /**
   * `kind`: a served kind, 'other', or '' when the request was not read; `seconds` unset when it
   * never became a review (a timeout, a parse error); `reason` for a denied object.
   */
  (result: 'mutated' | 'unchanged' | 'denied' | 'malformed' | 'error', kind: string, seconds?: number, reason?: DenialReason): void;
}

export interface WebhookServer {
  server: Server;
  setTls(tls: TlsMaterial): void;
  /**
   * From now on every answer closes its connection, so that a client holding connections to
   * this replica (the API server pools them) opens its next one to another. Requests are
   * still answered: closing a connection the client may be sending on loses that request.
   */
  drain(): void;
  close(): Promise<void>;
}

/** A pod's controller chain as far as it can be read within the admission's budget (chains.ts). */
export type ChainResolver = (namespace: string, owners: readonly OwnerReference[]) => Promise<ControllerChain>;

export function startWebhookServer(opts: {
  host: string; port: number; tls: TlsMaterial; log: Logger; observe?: WebhookObserver;
  /** Reads a pod's owners for the chain's annotations; without it they say Pending at admission. */
  chains?: ChainResolver;
  /** Defaults REQUEST_TIMEOUT_MS, HANDSHAKE_TIMEOUT_MS, IDLE_TIMEOUT_MS and MAX_BUFFERED_BYTES; tests shorten them. */
  requestTimeoutMs?: number;
  handshakeTimeoutMs?: number;
  idleTimeoutMs?: number;
  maxBufferedBytes?: number;
}): Promise<WebhookServer> {
  const observe = opts.observe ?? (() => {});
  const requestTimeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const budget = new ByteBudget(opts.maxBufferedBytes ?? MAX_BUFFERED_BYTES);
  // Node checks the timeouts every connectionsCheckingInterval (30 s by default): often enough here.
  const server = createServer({ cert: opts.tls.cert, key: opts.tls.key, minVersion: 'TLSv1.2', handshakeTimeout: opts.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS,
    connectionsCheckingInterval: Math.min(1_000, requestTimeout / 2) }, (req, res) => {
    if (req.url?.split('?')[0] !== MUTATE_PATH) return reply(res, 404, `not found: POST AdmissionReviews to ${MUTATE_PATH}\n`);
    if (req.method !== 'POST') return reply(res, 405, 'method not allowed: POST an AdmissionReview\n');
    const started = process.hrtime.bigint();
    const done = (result: Result, kind: string, reason?: DenialReason) => observe(result, kind, Number(process.hrtime.bigint() - started) / 1e9, reason);
    // The rest of a refused body is never read, so its connection cannot carry another request.
    const refuse = (status: number, reason: string, message: string, result: Result) => {
      opts.log.warn({ [F.reason]: reason }, message);
      done(result, '');
      reply(res, status, `${message}\n`, undefined, true);
    };
    const declared = contentLength(req);
    if (declared === undefined) return refuse(411, 'LengthRequired', 'a request body must declare its Content-Length', 'malformed');
    if (declared > MAX_BODY_BYTES) return refuse(413, 'TooLarge', `request body over ${MAX_BODY_BYTES} bytes`, 'malformed');
    readBody(req, declared, budget).then((body) => {
      if (body === BUSY) return refuse(503, 'Busy', `request bodies being read hold ${budget.max} bytes already; retry`, 'error');
      if (body === undefined) return refuse(400, 'BadLength', 'the body is longer than its Content-Length', 'malformed');
      void handle(body, res, opts.log, done, opts.chains);
    }, () => res.destroy());
  });
  // A request that times out or does not parse: counted and logged like a malformed review,
  // then answered as Node would (with a listener, Node leaves the answer to us).
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // Not HTTP (a TLS handshake that failed or timed out, a reset): there is no one to answer,
    // and an answer written before the handshake would hold the socket open for good.
    if (!/^(HPE_|ERR_HTTP_)/.test(err.code ?? '') || !socket.writable) {
      opts.log.debug({ [F.reason]: 'ClientError', [F.err]: clip(`${err.code ?? 'error'}: ${err.message}`, MAX_FIELD) }, 'connection dropped');
      return void socket.destroy();
    }
    const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large'
      : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW' ? '413 Payload Too Large' : '400 Bad Request';
    opts.log.warn({ [F.reason]: 'ClientError', [F.err]: clip(`${err.code ?? 'error'}: ${err.message}`, MAX_FIELD) }, `answered ${status}`);
    observe('malformed', '');
    // Then closed both ways: a client that keeps its half open would keep the request (and
    // what its body holds) alive.
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, () => socket.destroy());
    setTimeout(() => socket.destroy(), 1_000).unref(); // one that does not read its answer either
  });
  server.requestTimeout = requestTimeout;
  server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, server.requestTimeout);
  server.keepAliveTimeout = 30_000; // the API server reuses connections
  server.setTimeout(opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS); // no listener: a quiet socket is destroyed
  server.maxConnections = MAX_CONNECTIONS;
  let draining = false;
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (draining) res.setHeader('Connection', 'close');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host || undefined, () => { // '' : every address, both families
      server.off('error', reject);
      resolve({
        server,
        setTls: (tls) => server.setSecureContext({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }),
        drain: () => { draining = true; },
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

async function handle(body: string, res: ServerResponse, log: Logger, done: (result: Result, kind: string, reason?: DenialReason) => void, chains?: ChainResolver): Promise<void> {
  let req;
  let kind = '';
  let m;
  try {
    req = parseReview(body);
    // Only served kinds become a metric label: any string can arrive here.
    kind = isServed(req.kind) ? req.kind.kind : 'other';
    const p = plan(req);
    const chain = p.act === 'mutate' && p.chain && chains ? await readChain(chains, p.chain, req, log) : undefined;
    m = admit(p, chain ? { chain: () => chain } : {});
  } catch (err) {
    if (!(err instanceof ReviewError)) return failed(err, req?.uid, res, log, done, kind);
    log.warn({ [F.reason]: 'MalformedReview', [F.err]: clip(err.message, MAX_FIELD) }, 'malformed AdmissionReview');
    done('malformed', kind);
    if (err.uid === undefined) return reply(res, 400, `not an AdmissionReview: ${clip(err.message, MAX_FIELD)}\n`);
    return reply(res, 200, reviewOf({ uid: err.uid, allowed: false, status: { code: 400, message: `malformed AdmissionReview: ${clip(err.message, MAX_FIELD)}` } }), 'application/json');
  }
  const what = { [F.kind]: clip(req.kind.kind, 63), [F.object]: clip(`${req.namespace ?? ''}/${req.name ?? ''}`, 320), [F.operation]: clip(req.operation, 16) };
  if (!m.allowed) {
    log.warn({ ...what, [F.reason]: m.reason, [F.err]: m.message }, 'denied');
    done('denied', kind, m.reason);
  } else if (m.patch.length > 0) {
    log.info({ ...what, [F.changed]: m.changed.slice(0, 20) }, 'rewrote metadata.ownerReferences fields');
    done('mutated', kind);
  } else {
    done('unchanged', kind);
  }
  reply(res, 200, reviewOf(responseFor(req.uid, m)), 'application/json');
}

/**
 * The pod's chain, or undefined when reading it failed: then admission's own value
 * (chainAtAdmission: Pending), which the agent fills in later. Its values are never worth
 * refusing the pod for.
 */
async function readChain(chains: ChainResolver, needed: { namespace: string; owners: readonly OwnerReference[] }, req: AdmissionRequest, log: Logger): Promise<ControllerChain | undefined> {
  try {
    return await chains(needed.namespace, needed.owners);
  } catch (err) {
    log.warn({ [F.reason]: 'ChainFailed', [F.object]: clip(`${req.namespace ?? ''}/${req.name ?? ''}`, 320), [F.err]: clip(String(err), MAX_FIELD) },
      'reading the pod\'s owners failed; its workload values say Pending until the agent fills them in');
    return undefined;
  }
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

/** The declared body length; undefined without one (a chunked body). */
function contentLength(req: IncomingMessage): number | undefined {
  const v = req.headers['content-length'];
  return v !== undefined && /^\d{1,10}$/.test(v) ? Number(v) : undefined;
}

const BUSY = Symbol('busy');

/**
 * The body as text, read into one buffer that doubles as bytes arrive, up to its declared
 * `length` (Node's parser holds the body to it); the buffer is charged to `budget` until the
 * body is read or the request ends. undefined: more arrived than declared; BUSY: the budget
 * is spent. The rest of the body is then not read.
 */
function readBody(req: IncomingMessage, length: number, budget: ByteBudget): Promise<string | undefined | typeof BUSY> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    let at = 0;
    let charged = 0;
    const giveBack = () => {
      budget.give(charged);
      charged = 0;
    };
    const stop = (why: undefined | typeof BUSY) => {
      req.removeAllListeners('data');
      req.pause();
      giveBack();
      resolve(why);
    };
    req.on('data', (c: Buffer) => {
      if (at + c.length > length) return stop(undefined);
      if (at + c.length > buf.length) {
        const size = Math.min(length, Math.max(at + c.length, 2 * buf.length, 16 * 1024));
        if (!budget.take(size - charged)) return stop(BUSY);
        charged = size;
        const grown = Buffer.allocUnsafe(size);
        buf.copy(grown, 0, 0, at);
        buf = grown;
      }
      c.copy(buf, at);
      at += c.length;
    });
    req.on('end', () => {
      const text = buf.toString('utf8', 0, at);
      giveBack();
      resolve(text);
    });
    req.once('close', giveBack); // the client went, or the request timed out
    req.on('error', (err) => {
      giveBack();
      reject(err);
    });
  });
}

function reply(res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8', close = false): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), ...(close ? { Connection: 'close' } : {}) });
  res.end(body);
}
