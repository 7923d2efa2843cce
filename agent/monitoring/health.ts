// /healthz (liveness), /readyz (readiness) and /metrics on one small HTTP server.
//
// Liveness only says the event loop answers: during an API outage restarting the
// agent would not help, and files already written stay valid. Readiness says the
// agent is in step with the API server.
//
// Any pod can reach this port (the pod network), on every node's agent at once, so
// connections are bounded: at most PER_ADDRESS from one address (probes and scrapes use
// one or two; a pod opening thousands would take the agent's memory, or the slots the
// kubelet's probes need), MAX_CONNECTIONS in all; headers within HEADERS_TIMEOUT_MS, a
// request within REQUEST_TIMEOUT_MS, and a connection quiet for IDLE_TIMEOUT_MS closed.

import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Registry } from 'prom-client';

// Not `import http from 'node:http'`: Node's ESM wrapper of a built-in reads every export,
// and node:http's WebSocket, CloseEvent and MessageEvent are lazy getters that load undici,
// about 12 MiB of RSS the agent never uses. getBuiltinModule returns the plain module.
const { createServer } = process.getBuiltinModule('node:http');

export interface ReadinessCheck {
  /** Empty when ready; otherwise why not. */
  (): string[];
}

export const PER_ADDRESS = 32;
export const MAX_CONNECTIONS = 1_024;
const HEADERS_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 10_000;
const IDLE_TIMEOUT_MS = 30_000;

export function startHealthServer(opts: {
  host: string; port: number; ready: ReadinessCheck; registry: Registry;
  /** Default IDLE_TIMEOUT_MS; tests shorten it. */
  idleTimeoutMs?: number;
}): Promise<http.Server> {
  const server = createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => {
    // Probes and scrapes read; nothing here changes state, so nothing else is answered 200.
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return reply(res, 405, 'method not allowed: GET or HEAD\n');
    }
    const url = req.url?.split('?')[0];
    if (url === '/healthz' || url === '/livez') return reply(res, 200, 'ok\n');
    if (url === '/readyz') {
      const problems = opts.ready();
      return problems.length === 0 ? reply(res, 200, 'ok\n') : reply(res, 503, problems.join('\n') + '\n');
    }
    if (url === '/metrics') {
      opts.registry.metrics().then(
        (text) => reply(res, 200, text, opts.registry.contentType),
        (err: unknown) => reply(res, 500, String(err)),
      );
      return;
    }
    reply(res, 404, 'not found\n');
  });
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.setTimeout(opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS); // no listener: a quiet socket is destroyed
  server.maxConnections = MAX_CONNECTIONS;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const from = socket.remoteAddress ?? '';
    const n = (open.get(from) ?? 0) + 1;
    if (n > PER_ADDRESS) return void socket.destroy();
    open.set(from, n);
    socket.once('close', () => {
      const left = (open.get(from) ?? 1) - 1;
      if (left > 0) open.set(from, left);
      else open.delete(from);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host || undefined, () => resolve(server)); // '' : every address, both families
  });
}

function reply(res: http.ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
  res.end(body);
}
