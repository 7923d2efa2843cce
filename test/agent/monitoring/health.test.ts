import { once } from 'node:events';
import type http from 'node:http';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PER_ADDRESS, startHealthServer } from '../../../agent/monitoring/health.ts';
import { HEALTH_ADDR } from '../../../agent/common/defaults.ts';
import { hostPort } from '../../../agent/common/flags.ts';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function serve(problems: string[] = [], idleTimeoutMs?: number) {
  const registry = new Registry();
  new Counter({ name: 'ownerrefs_test_total', help: 'a test counter', registers: [registry] }).inc(3);
  const server = await startHealthServer({ host: '127.0.0.1', port: 0, ready: () => problems, registry, ...(idleTimeoutMs ? { idleTimeoutMs } : {}) });
  servers.push(server);
  const { port } = server.address() as { port: number };
  return async (p: string, method = 'GET') => {
    const res = await fetch(`http://127.0.0.1:${port}${p}`, { method });
    return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
  };
}

// Whether this machine's loopback has IPv6 (a kernel booted with ipv6.disable=1 has none).
const IPV6_LOOPBACK = (() => { try { return /^0{31}1 /m.test(readFileSync('/proc/net/if_inet6', 'utf8')); } catch { return false; } })();

describe('health server', () => {
  // The manifests' --health-addr=:PORT: a dual-stack pod's probes and scrapes may come over either family.
  it.runIf(IPV6_LOOPBACK)('at the default address, answers over IPv4 and IPv6 alike', async () => {
    const [host] = hostPort('health-addr', HEALTH_ADDR);
    const server = await startHealthServer({ host, port: 0, ready: () => [], registry: new Registry() });
    servers.push(server);
    const { port } = server.address() as { port: number };
    const statuses = await Promise.all(['127.0.0.1', '[::1]'].map(async (h) => (await fetch(`http://${h}:${port}/healthz`)).status));
    expect(statuses).toEqual([200, 200]);
  });

  it.each(['/healthz', '/livez', '/healthz?verbose=1'])('%s answers 200 while the event loop answers', async (p) => {
    const get = await serve(['pod watch down for 90 s']);
    expect(await get(p)).toMatchObject({ status: 200, body: 'ok\n' });
  });

  it('/readyz is 200 when nothing is wrong, 503 with every reason otherwise', async () => {
    expect(await (await serve())('/readyz')).toMatchObject({ status: 200 });
    expect(await (await serve(['pod list not synced yet', 'node configuration not read yet']))('/readyz'))
      .toMatchObject({ status: 503, body: 'pod list not synced yet\nnode configuration not read yet\n' });
  });

  it('/metrics serves the registry in the Prometheus text format', async () => {
    const r = await (await serve())('/metrics');
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(r.body).toContain('ownerrefs_test_total 3');
  });

  it.each(['POST', 'DELETE', 'PUT'])('answers %s with 405 on every path (only probes and scrapes read it)', async (method) => {
    const get = await serve();
    for (const p of ['/healthz', '/metrics', '/other']) expect(await get(p, method)).toMatchObject({ status: 405, body: 'method not allowed: GET or HEAD\n' });
  });

  it('anything else is 404', async () => {
    expect(await (await serve())('/debug/pprof')).toMatchObject({ status: 404 });
  });

  // Any pod can reach the port, on every node at once.
  it(`keeps at most ${PER_ADDRESS} connections from one address (a pod opening thousands would take the agent's memory), and serves again once they go`, async () => {
    const get = await serve();
    const port = (servers.at(-1)!.address() as { port: number }).port;
    const sockets = await Promise.all(Array.from({ length: PER_ADDRESS + 8 }, () => new Promise<net.Socket>((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => resolve(c));
      c.on('error', () => {});
    })));
    let closed = 0;
    for (const c of sockets) c.once('close', () => { closed++; });
    await vi.waitFor(() => expect(closed).toBeGreaterThanOrEqual(8), { timeout: 5_000 });
    await new Promise((r) => setTimeout(r, 100));
    expect(closed).toBe(8); // the rest stay (quiet ones go only after 30 s)
    for (const c of sockets) c.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(await get('/healthz')).toMatchObject({ status: 200 });
  });

  it('closes a connection that sends nothing', async () => {
    await serve([], 200);
    const port = (servers.at(-1)!.address() as { port: number }).port;
    const c = net.connect(port, '127.0.0.1');
    c.on('error', () => {});
    await once(c, 'close');
  });
});
