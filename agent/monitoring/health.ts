// /healthz (liveness), /readyz (readiness) and /metrics on one small HTTP server.
//
// Liveness only says the event loop answers: during an API outage restarting the
// agent would not help, and files already written stay valid. Readiness says the
// agent is in step with the API server.

import type http from 'node:http';
import type { Registry } from 'prom-client';

// Not `import http from 'node:http'`: Node's ESM wrapper of a built-in reads every export,
// and node:http's WebSocket, CloseEvent and MessageEvent are lazy getters that load undici,
// about 12 MiB of RSS the agent never uses. getBuiltinModule returns the plain module.
const { createServer } = process.getBuiltinModule('node:http');

export interface ReadinessCheck {
  /** Empty when ready; otherwise why not. */
  (): string[];
}

export function startHealthServer(opts: { host: string; port: number; ready: ReadinessCheck; registry: Registry }): Promise<http.Server> {
  const server = createServer((req, res) => {
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
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve(server));
  });
}

function reply(res: http.ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
  res.end(body);
}
