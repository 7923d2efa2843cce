// A small HTTPS client for the few API calls the agent makes (list, watch, events).
//
// Not @kubernetes/client-node's watch or informer: the agent needs control of the
// watch parameters (bookmarks, server timeouts), of reconnection, and a stall watchdog
// on the raw byte stream. Credentials come from a Credentials source (kubeconfig.ts by
// default; client-node's KubeConfig has the same two methods and works too).

import https from 'node:https';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { HANDSHAKE_DEADLINE } from '../common/defaults.ts';

export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  /** The Status's details.name: set on a 404 for a missing object, unset when the resource itself is not served. */
  readonly detailsName: string | undefined;
  /** The server's Retry-After (429 from priority and fairness, some 5xx), in ms; unset without one. */
  readonly retryAfterMs: number | undefined;

  constructor(status: number, reason: string, message: string, cause?: unknown, detailsName?: string, retryAfterMs?: number) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.detailsName = detailsName;
    this.retryAfterMs = retryAfterMs;
  }
}

/** The seam the reflector and event recorder use. */
export interface ApiClient {
  /** `accept` replaces application/json (a metadata-only GET asks for PartialObjectMetadata). */
  json<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown, contentType?: string, accept?: string): Promise<T>;
  /** Opens a streaming GET; resolves once the status line is 200, else rejects with ApiError. */
  stream(path: string, signal: AbortSignal): Promise<IncomingMessage>;
}

/** Where the server address and per-request TLS material and token come from. */
export interface Credentials {
  getCurrentCluster(): { server: string } | null;
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

export interface RequestObserver {
  (verb: string, path: string, status: number | 'error'): void;
}

/** A plain request's socket may be silent this long. */
const IDLE_TIMEOUT_MS = 30_000;
/**
 * A plain request (not a watch) must be answered whole within this: the API server's own
 * default --request-timeout. A body that trickles a byte at a time never trips the idle bound.
 */
export const REQUEST_DEADLINE_MS = 60_000;
/** Plain requests share this many sockets; watches have their own agent, never queued behind them. */
const PLAIN_SOCKETS = 8;

export interface ClientOptions {
  /** A plain request's whole answer: REQUEST_DEADLINE_MS unless a test shortens it. */
  deadlineMs?: number;
  /** A new connection's TLS handshake: HANDSHAKE_DEADLINE unless a test shortens it. */
  handshake?: { initialMs: number; maxMs: number };
  /** Told of each new connection given up at its handshake deadline (`ms`), for a metric. */
  handshakeTimedOut?: (ms: number) => void;
}

export class KubeApiClient implements ApiClient {
  readonly #kc: Credentials;
  readonly #server: URL;
  readonly #observe: RequestObserver;
  readonly #deadlineMs: number;
  readonly #handshake: { initialMs: number; maxMs: number };
  readonly #handshakeTimedOut: (ms: number) => void;
  /** What the next new connection gets to finish its TLS handshake (HANDSHAKE_DEADLINE). */
  #handshakeMs: number;
  /** Keep-alive agents, for plain requests and for watches, and the TLS material they were made with. */
  readonly #agents = new Map<'plain' | 'stream', { agent: https.Agent; tls: string }>();

  constructor(kc: Credentials, observe: RequestObserver = () => {}, { deadlineMs = REQUEST_DEADLINE_MS, handshake = HANDSHAKE_DEADLINE, handshakeTimedOut = () => {} }: ClientOptions = {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.#kc = kc;
    this.#server = new URL(cluster.server);
    this.#observe = observe;
    this.#deadlineMs = deadlineMs;
    this.#handshake = handshake;
    this.#handshakeMs = handshake.initialMs;
    this.#handshakeTimedOut = handshakeTimedOut;
  }

  async json<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown, contentType = 'application/json', accept?: string): Promise<T> {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.#deadlineMs);
    try {
      const res = await this.#send(method, path, body === undefined ? undefined : JSON.stringify(body), contentType, deadline.signal, accept, 'plain');
      const text = await readAll(res);
      if (res.statusCode !== 200 && res.statusCode !== 201) throw apiError(res.statusCode ?? 0, text, res.headers['retry-after']);
      return JSON.parse(text) as T;
    } catch (err) {
      if (!deadline.signal.aborted) throw err;
      throw Object.assign(new Error(`${method} ${path.split('?')[0]} was not answered whole within ${this.#deadlineMs} ms`, { cause: err }), { code: 'ETIMEDOUT' });
    } finally {
      clearTimeout(timer);
    }
  }

  async stream(path: string, signal: AbortSignal): Promise<IncomingMessage> {
    const res = await this.#send('GET', path, undefined, undefined, signal, undefined, 'stream');
    if (res.statusCode !== 200) throw apiError(res.statusCode ?? 0, await readAll(res), res.headers['retry-after']);
    return res;
  }

  async #send(method: string, path: string, body: string | undefined, contentType: string | undefined,
    signal: AbortSignal, accept = 'application/json', kind: 'plain' | 'stream' = 'plain'): Promise<IncomingMessage> {
    const opts: https.RequestOptions = {};
    // Fresh bearer token (token files rotate) and TLS material; we keep our own agent (below).
    await this.#kc.applyToHTTPSOptions(opts);
    const headers: Record<string, string> = { Accept: accept, ...(opts.headers as Record<string, string>) };
    if (body !== undefined) {
      headers['Content-Type'] = contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    const verb = method === 'GET' && path.includes('watch=true') ? 'WATCH' : method;
    return new Promise((resolve, reject) => {
      const req = https.request({
        protocol: this.#server.protocol,
        hostname: this.#server.hostname,
        port: this.#server.port,
        path: this.#server.pathname.replace(/\/$/, '') + path,
        method,
        headers,
        auth: opts.auth,
        servername: opts.servername,
        agent: this.#agentFor(opts, kind),
        signal,
        // Streams have their own watchdog; plain requests an idle bound besides their deadline.
        timeout: kind === 'plain' ? IDLE_TIMEOUT_MS : undefined,
      }, (res) => {
        this.#observe(verb, path, res.statusCode ?? 0);
        resolve(res);
      });
      req.once('socket', (socket) => this.#boundHandshake(req, socket));
      req.on('timeout', () => req.destroy(Object.assign(new Error(`no data for ${IDLE_TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' })));
      req.on('error', (err) => {
        this.#observe(verb, path, 'error');
        reject(err);
      });
      req.end(body);
    });
  }

  /**
   * A new connection must finish its TLS handshake within the current deadline of its TCP
   * connect, else its request fails (ETIMEDOUT) and the caller retries as after any failure:
   * a server that accepted the connection without serving it (a kube-apiserver still
   * starting binds its port early) is not waited for until the stall watchdog. The deadline
   * doubles after each one that did not finish; one that finishes sets it to twice the time
   * it took, within the bounds. See HANDSHAKE_DEADLINE.
   */
  #boundHandshake(req: ClientRequest, socket: Socket): void {
    // Only a socket still connecting is new. A kept-alive socket serves many requests, and
    // Node marks as reusedSocket only those that found it idle, not those queued for it.
    if (!socket.connecting) return;
    socket.once('connect', () => {
      const ms = this.#handshakeMs;
      const connected = performance.now();
      let settled = false;
      const timer = setTimeout(() => {
        // After this turn's I/O: when the event loop was busy past the deadline, a server
        // answer already waiting finishes the handshake first.
        setImmediate(() => {
          if (settled) return;
          settled = true;
          this.#handshakeMs = Math.min(this.#handshake.maxMs, Math.max(this.#handshakeMs, 2 * ms));
          this.#handshakeTimedOut(ms);
          req.destroy(Object.assign(new Error(`${this.#server.host} did not finish a TLS handshake within ${ms} ms of connecting`), { code: 'ETIMEDOUT' }));
        });
      }, ms);
      const settle = () => {
        settled = true;
        clearTimeout(timer);
      };
      (socket as TLSSocket).once('secureConnect', () => {
        if (settled) return;
        settle();
        const took = performance.now() - connected;
        this.#handshakeMs = Math.min(this.#handshake.maxMs, Math.max(this.#handshake.initialMs, Math.ceil(2 * took)));
      });
      socket.once('close', settle);
    });
  }

  /**
   * One keep-alive agent per kind, rebuilt only when the TLS material changes (certificate
   * rotation). Watches have their own, unbounded (an agent holds two): plain requests that
   * hang (a slow owner read) must never hold the sockets a watch needs.
   */
  #agentFor(opts: https.RequestOptions, kind: 'plain' | 'stream'): https.Agent {
    const tls = [opts.ca, opts.cert, opts.key, opts.rejectUnauthorized, opts.servername].map(String).join('|');
    const had = this.#agents.get(kind);
    if (had?.tls === tls) return had.agent;
    had?.agent.destroy();
    const agent = new https.Agent({
      keepAlive: true,
      ...(kind === 'plain' ? { maxSockets: PLAIN_SOCKETS } : {}),
      ca: opts.ca,
      cert: opts.cert,
      key: opts.key,
      rejectUnauthorized: opts.rejectUnauthorized ?? true,
      servername: opts.servername,
    });
    this.#agents.set(kind, { agent, tls });
    return agent;
  }

  close(): void {
    for (const { agent } of this.#agents.values()) agent.destroy();
  }
}

async function readAll(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Retry-After in delta-seconds (what the API server sends), at most 10 min; else undefined. */
export function retryAfterMs(header: string | undefined): number | undefined {
  if (header === undefined || !/^\d{1,6}$/.test(header.trim())) return undefined;
  return Math.min(Number(header.trim()), 600) * 1000;
}

function apiError(status: number, text: string, retryAfter?: string): ApiError {
  let reason = '';
  let message = text.slice(0, 500);
  let name: string | undefined;
  try {
    const s = JSON.parse(text) as { reason?: string; message?: string; details?: { name?: string } };
    reason = s.reason ?? '';
    message = s.message ?? message;
    name = s.details?.name;
  } catch { /* not a Status object */ }
  return new ApiError(status, reason, `API ${status}${reason ? ' ' + reason : ''}: ${message}`, undefined, name, retryAfterMs(retryAfter));
}
