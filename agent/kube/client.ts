// A small HTTPS client for the few API calls the agent makes (list, watch, events).
//
// Not @kubernetes/client-node's watch or informer: the agent needs control of the
// watch parameters (bookmarks, server timeouts), of reconnection, and a stall watchdog
// on the raw byte stream. Credentials come from a Credentials source (kubeconfig.ts by
// default; client-node's KubeConfig has the same two methods and works too).

import https from 'node:https';
import type { IncomingMessage } from 'node:http';

export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  /** The Status's details.name: set on a 404 for a missing object, unset when the resource itself is not served. */
  readonly detailsName: string | undefined;

  constructor(status: number, reason: string, message: string, cause?: unknown, detailsName?: string) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.detailsName = detailsName;
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

const REQUEST_TIMEOUT_MS = 30_000;

export class KubeApiClient implements ApiClient {
  readonly #kc: Credentials;
  readonly #server: URL;
  readonly #observe: RequestObserver;
  #agent: https.Agent | undefined;
  #tlsKey = '';

  constructor(kc: Credentials, observe: RequestObserver = () => {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.#kc = kc;
    this.#server = new URL(cluster.server);
    this.#observe = observe;
  }

  async json<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown, contentType = 'application/json', accept?: string): Promise<T> {
    const res = await this.#send(method, path, body === undefined ? undefined : JSON.stringify(body), contentType, undefined, accept);
    const text = await readAll(res);
    if (res.statusCode !== 200 && res.statusCode !== 201) throw apiError(res.statusCode ?? 0, text);
    return JSON.parse(text) as T;
  }

  async stream(path: string, signal: AbortSignal): Promise<IncomingMessage> {
    const res = await this.#send('GET', path, undefined, undefined, signal);
    if (res.statusCode !== 200) throw apiError(res.statusCode ?? 0, await readAll(res));
    return res;
  }

  async #send(method: string, path: string, body: string | undefined, contentType: string | undefined,
    signal?: AbortSignal, accept = 'application/json'): Promise<IncomingMessage> {
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
        agent: this.#agentFor(opts),
        signal,
        // Streams have their own watchdog; plain requests get a socket timeout.
        timeout: signal ? undefined : REQUEST_TIMEOUT_MS,
      }, (res) => {
        this.#observe(verb, path, res.statusCode ?? 0);
        resolve(res);
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error(`request timed out after ${REQUEST_TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' })));
      req.on('error', (err) => {
        this.#observe(verb, path, 'error');
        reject(err);
      });
      req.end(body);
    });
  }

  /** One keep-alive agent, rebuilt only when the TLS material changes (certificate rotation). */
  #agentFor(opts: https.RequestOptions): https.Agent {
    const key = [opts.ca, opts.cert, opts.key, opts.rejectUnauthorized, opts.servername].map(String).join('|');
    if (!this.#agent || key !== this.#tlsKey) {
      this.#agent?.destroy();
      this.#agent = new https.Agent({
        keepAlive: true,
        maxSockets: 8,
        ca: opts.ca,
        cert: opts.cert,
        key: opts.key,
        rejectUnauthorized: opts.rejectUnauthorized ?? true,
        servername: opts.servername,
      });
      this.#tlsKey = key;
    }
    return this.#agent;
  }

  close(): void {
    this.#agent?.destroy();
  }
}

async function readAll(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function apiError(status: number, text: string): ApiError {
  let reason = '';
  let message = text.slice(0, 500);
  let name: string | undefined;
  try {
    const s = JSON.parse(text) as { reason?: string; message?: string; details?: { name?: string } };
    reason = s.reason ?? '';
    message = s.message ?? message;
    name = s.details?.name;
  } catch { /* not a Status object */ }
  return new ApiError(status, reason, `API ${status}${reason ? ' ' + reason : ''}: ${message}`, undefined, name);
}
