// Loopback networking helpers for the control-plane harness.
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

// Asks the kernel for a free loopback port. The port is released before the
// component binds it, which leaves a tiny race; the kernel hands out ephemeral
// ports round-robin, so an immediate reuse by someone else is very unlikely.
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('no port'));
      });
    });
  });
}

export interface TlsFiles {
  ca?: string;
  cert?: string;
  key?: string;
}

export interface HttpResult {
  status: number;
  body: string;
}

// One request with a short socket timeout; errors become rejections.
export function httpCall(url: string, opts: { method?: string; body?: string; tls?: TlsFiles } = {}):
  Promise<HttpResult> {
  const u = new URL(url);
  const tls = opts.tls ?? {};
  return new Promise((resolve, reject) => {
    const common = {
      method: opts.method ?? 'GET',
      timeout: 10_000,
      headers: opts.body === undefined ? {} : { 'content-type': 'application/json' },
    };
    const onResponse = (res: import('node:http').IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    };
    const req = u.protocol === 'https:'
      ? httpsRequest(u, {
        ...common,
        ca: tls.ca ? readFileSync(tls.ca) : undefined,
        cert: tls.cert ? readFileSync(tls.cert) : undefined,
        key: tls.key ? readFileSync(tls.key) : undefined,
        // Components other than the apiserver serve our CA-signed cert too, but
        // with no CA given we only care that something answers.
        rejectUnauthorized: tls.ca !== undefined,
      }, onResponse)
      : httpRequest(u, common, onResponse);
    req.on('timeout', () => req.destroy(new Error(`timeout calling ${url}`)));
    req.on('error', reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

// Polls `probe` until it returns true. Fails early if `dead()` reports the
// component exited. The deadline is a convergence bound for a slow machine.
export async function waitHealthy(what: string, probe: () => Promise<boolean>,
  opts: { timeoutMs: number; dead?: () => boolean; logHint?: () => string }): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let last = '';
  for (;;) {
    if (opts.dead?.()) throw new Error(`${what} exited during startup${opts.logHint?.() ?? ''}`);
    try {
      if (await probe()) return;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} not healthy after ${opts.timeoutMs} ms (${last})${opts.logHint?.() ?? ''}`);
    }
    await sleep(200);
  }
}
