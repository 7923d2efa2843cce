// The agent's CSI sockets (agent/files/csi/server.ts) called by a gRPC implementation that is not
// ours: @grpc/grpc-js, decoding with @grpc/proto-loader from the .proto files. The grpc-go
// side (the kubelet, csi-sanity) is test/e2e's and localcluster/csi's.
import { lstatSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Code, CsiError } from '../../../../agent/files/csi/driver.ts';
import { MAX_MESSAGE_BYTES, serveUnix, type Handlers, type UnixServer } from '../../../../agent/files/csi/server.ts';
import { loadServices } from '../../../../agent/files/csi/services.ts';
import { csiClient } from '../../../support/csi.ts';

const defs = loadServices();
const servers: UnixServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

function sock(): string {
  return path.join(mkdtempSync(path.join(os.tmpdir(), 'csi-server-')), 'csi.sock');
}

async function serve(node: Handlers, opts: { socket?: string; stopGraceMs?: number; bodyTimeoutMs?: number; idleTimeoutMs?: number; maxBufferedBytes?: number } = {}) {
  const calls: string[] = [];
  const refused: string[] = [];
  const socket = opts.socket ?? sock();
  const server = await serveUnix(socket, [[defs.identity, { Probe: () => ({ ready: { value: true } }) }], [defs.node, node]], {
    observe: (method, code) => calls.push(`${method} ${code}`),
    onRefused: (code, message) => refused.push(`${code} ${message}`),
    ...(opts.stopGraceMs !== undefined ? { stopGraceMs: opts.stopGraceMs } : {}),
    ...(opts.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: opts.bodyTimeoutMs } : {}),
    ...(opts.idleTimeoutMs !== undefined ? { idleTimeoutMs: opts.idleTimeoutMs } : {}),
    ...(opts.maxBufferedBytes !== undefined ? { maxBufferedBytes: opts.maxBufferedBytes } : {}),
  });
  servers.push(server);
  return { socket, server, calls, refused, c: csiClient(socket) };
}

describe('serveUnix', () => {
  it('serves each handler at its rpc, decoded requests in and encoded responses out', async () => {
    const { c, calls } = await serve({
      NodeGetInfo: () => ({ nodeId: 'node-a', maxVolumesPerNode: '9007199254740993' }),
      NodePublishVolume: (req: Record<string, unknown>) => {
        expect(req).toMatchObject({ volumeId: 'v1', targetPath: '/t', readonly: true, volumeContext: { k: 'v' } });
        return {};
      },
    });
    expect(await c.call('node', 'NodeGetInfo')).toMatchObject({ code: 0, res: { nodeId: 'node-a', maxVolumesPerNode: '9007199254740993' } });
    expect(await c.call('node', 'NodePublishVolume', { volumeId: 'v1', targetPath: '/t', readonly: true, volumeContext: { k: 'v' } })).toMatchObject({ code: 0 });
    expect(await c.call('identity', 'Probe')).toMatchObject({ code: 0, res: { ready: { value: true } } });
    expect(calls).toEqual(['NodeGetInfo OK', 'NodePublishVolume OK', 'Probe OK']);
  });

  it.each<[string, () => never, number, string, string]>([
    ['a CsiError: its code and message, exactly', () => { throw new CsiError(Code.NotFound, 'pod ns/ünï is gone: 100%\nretry'); }, 5, 'pod ns/ünï is gone: 100%\nretry', 'NOT_FOUND'],
    ['any other error: INTERNAL', () => { throw new TypeError('boom'); }, 13, 'boom', 'INTERNAL'],
  ])('answers %s', async (_name, handler, code, details, counted) => {
    const { c, calls } = await serve({ NodeGetInfo: handler });
    expect(await c.call('node', 'NodeGetInfo')).toEqual({ code, details });
    expect(calls).toEqual([`NodeGetInfo ${counted}`]);
  });

  it('answers UNIMPLEMENTED for an rpc it has no handler for, counts and reports it as refused, and serves the next call', async () => {
    const { c, calls, refused } = await serve({ NodeGetInfo: () => ({ nodeId: 'n' }) });
    expect((await c.call('node', 'NodeGetCapabilities')).code).toBe(12);
    expect(await c.call('node', 'NodeGetInfo')).toMatchObject({ code: 0, res: { nodeId: 'n' } });
    expect(calls).toEqual(['refused UNIMPLEMENTED', 'NodeGetInfo OK']);
    expect(refused).toEqual(['UNIMPLEMENTED unknown method "/csi.v1.Node/NodeGetCapabilities"']);
  });

  it('refuses a request larger than MAX_MESSAGE_BYTES with RESOURCE_EXHAUSTED, before the handler sees it', async () => {
    let called = 0;
    const { c } = await serve({ NodePublishVolume: () => { called++; return {}; } });
    const r = await c.call('node', 'NodePublishVolume', { volumeId: 'x'.repeat(MAX_MESSAGE_BYTES + 1) });
    expect(r.code).toBe(8);
    expect(called).toBe(0);
    expect((await c.call('node', 'NodePublishVolume', { volumeId: 'x'.repeat(1000) })).code).toBe(0);
  });

  it('accepts a request as large as a pod can make its volume context (a pod is at most 1.5 MiB in etcd)', async () => {
    let got = 0;
    const { c } = await serve({ NodePublishVolume: (req: Record<string, unknown>) => { got = JSON.stringify(req).length; return {}; } });
    const downwardAPI = 'x'.repeat(1_536 * 1024);
    expect((await c.call('node', 'NodePublishVolume', { volumeId: 'v', volumeContext: { downwardAPI } })).code).toBe(0);
    expect(got).toBeGreaterThan(downwardAPI.length);
    expect(MAX_MESSAGE_BYTES).toBeGreaterThanOrEqual(1_536 * 1024 + 64 * 1024);
  });

  it('answers 300 calls in flight at once, each on its own connection (the kubelet dials one per call)', async () => {
    const n = 300;
    let arrived = 0;
    const release = Promise.withResolvers<void>();
    const { socket } = await serve({ NodeGetInfo: async () => { arrived++; await release.promise; return { nodeId: 'n' }; } });
    let failed = 0;
    const sessions: http2.ClientHttp2Session[] = [];
    const calls = Array.from({ length: n }, () => new Promise<string>((resolve) => {
      const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
      sessions.push(session);
      session.on('error', () => {});
      const stream = session.request({ ':method': 'POST', ':path': '/csi.v1.Node/NodeGetInfo', 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => { failed++; resolve('failed'); });
      stream.on('trailers', (t) => resolve(String(t['grpc-status'])));
      stream.on('close', () => resolve('closed without trailers'));
      stream.resume();
      stream.end(Buffer.alloc(5)); // an empty message
    }));
    await vi.waitFor(() => expect(arrived + failed).toBe(n), { timeout: 20_000, interval: 20 });
    release.resolve();
    const codes = await Promise.all(calls);
    for (const s of sessions) s.destroy();
    expect({ arrived, failed }).toEqual({ arrived: n, failed: 0 });
    expect(new Set(codes)).toEqual(new Set(['0']));
  });

  it('bounds the bytes all requests being received hold together, and gives them back when a request is read or dropped', async () => {
    const { socket, c, refused } = await serve({ NodeGetInfo: () => ({ nodeId: 'n' }), NodePublishVolume: () => ({}) }, { maxBufferedBytes: 1_000 });
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    session.on('error', () => {});
    const slow = session.request({ ':method': 'POST', ':path': '/csi.v1.Node/NodeGetInfo', 'content-type': 'application/grpc' });
    slow.on('error', () => {});
    slow.write(Buffer.concat([Buffer.from([0, 0, 0, 3, 0x84]), Buffer.alloc(595)])); // 600 of a 905-byte request, the rest not sent yet
    await vi.waitFor(() => expect(session.state.remoteWindowSize).toBeDefined());
    await new Promise((r) => setTimeout(r, 50));
    const big = { volumeId: 'x'.repeat(600) };
    expect((await c.call('node', 'NodePublishVolume', big)).code).toBe(8); // RESOURCE_EXHAUSTED: 600 + 600 > 1,000
    expect(refused.at(-1)).toMatch(/^RESOURCE_EXHAUSTED requests being received hold 1000 bytes/);
    slow.close(http2.constants.NGHTTP2_CANCEL); // the client gives up: its 600 bytes are given back
    await once(slow, 'close');
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 3; i++) expect((await c.call('node', 'NodePublishVolume', big)).code).toBe(0); // and read requests give theirs back
    session.destroy();
  });

  it('counts a request against that bound while its call is answered too (a publish may wait seconds for its pod)', async () => {
    const release = Promise.withResolvers<void>();
    const started = Promise.withResolvers<void>();
    const { c } = await serve({ NodePublishVolume: async (req: Record<string, unknown>) => {
      if (req.volumeId === 'waits') { started.resolve(); await release.promise; }
      return {};
    } }, { maxBufferedBytes: 1_000 });
    const waiting = c.call('node', 'NodePublishVolume', { volumeId: 'waits', targetPath: 'x'.repeat(600) });
    await started.promise;
    expect((await c.call('node', 'NodePublishVolume', { volumeId: 'v', targetPath: 'y'.repeat(600) })).code).toBe(8);
    release.resolve();
    expect((await waiting).code).toBe(0);
    expect((await c.call('node', 'NodePublishVolume', { volumeId: 'v', targetPath: 'y'.repeat(600) })).code).toBe(0);
  });

  it('makes the socket 0600 (only root, the kubelet, may call)', async () => {
    const { socket } = await serve({});
    expect(lstatSync(socket).mode & 0o777).toBe(0o600);
  });

  it('replaces a socket left by an earlier run, and refuses (never deletes) anything else at the path', async () => {
    const first = await serve({ NodeGetInfo: () => ({ nodeId: 'old' }) });
    await first.server.stop();
    servers.splice(servers.indexOf(first.server), 1);
    const stale = net.createServer();
    await new Promise<void>((r) => stale.listen(first.socket, r));
    stale.close(); // closing a listener does not unlink its path here: a stale socket file stays
    const again = await serve({ NodeGetInfo: () => ({ nodeId: 'new' }) }, { socket: first.socket });
    expect(await again.c.call('node', 'NodeGetInfo')).toMatchObject({ res: { nodeId: 'new' } });

    const file = sock();
    writeFileSync(file, 'not a socket');
    await expect(serveUnix(file, [])).rejects.toThrow(/not a socket; refusing/);
    expect(readFileSync(file, 'utf8')).toBe('not a socket');
  });

  it('keeps serving after a client that does not speak HTTP/2', async () => {
    const { socket, c } = await serve({ NodeGetInfo: () => ({ nodeId: 'n' }) });
    await new Promise<void>((resolve) => {
      const raw = net.connect(socket, () => raw.end('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      raw.on('close', () => resolve());
      raw.on('error', () => resolve());
      raw.resume();
    });
    expect(await c.call('node', 'NodeGetInfo')).toMatchObject({ code: 0 });
  });

  it('stop() lets a call in flight finish, then removes the socket', async () => {
    let release!: () => void;
    const started = Promise.withResolvers<void>();
    const { socket, server, c } = await serve({
      NodeGetInfo: async () => {
        started.resolve();
        await new Promise<void>((r) => { release = r; });
        return { nodeId: 'finished' };
      },
    });
    const call = c.call('node', 'NodeGetInfo');
    await started.promise;
    const stopped = server.stop();
    release();
    expect(await call).toMatchObject({ code: 0, res: { nodeId: 'finished' } });
    await stopped;
    servers.splice(servers.indexOf(server), 1);
    expect(() => lstatSync(socket)).toThrow(/ENOENT/);
  });

  // A peer that never reads or closes (a wedged client, a hand-opened socket) must not hold
  // the agent's shutdown: after the grace period its connection is cut.
  it.each([
    ['with the HTTP/2 preface', true],
    ['without it', false],
  ])('stop() returns after the grace period with a peer that never closes its connection (%s)', async (_name, preface) => {
    const { socket, server } = await serve({}, { stopGraceMs: 50 });
    const raw = net.connect(socket);
    raw.on('error', () => {});
    raw.pause(); // never reads
    await new Promise<void>((r) => raw.once('connect', () => r()));
    if (preface) raw.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    await new Promise((r) => setTimeout(r, 50));
    await server.stop();
    servers.splice(servers.indexOf(server), 1);
    // And the agent's end of that connection is gone, not left open.
    const closed = new Promise<void>((r) => raw.once('close', () => r()));
    raw.resume();
    await closed;
  });

  // Without these, streams that never end held their buffers (up to MAX_MESSAGE_BYTES each, 128 per
  // connection) and connections that sent nothing stayed open, for ever.
  it('answers DEADLINE_EXCEEDED to a request whose body never ends, and frees its stream', async () => {
    const { socket } = await serve({ NodeGetInfo: () => ({ nodeId: 'n' }) }, { bodyTimeoutMs: 100 });
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    session.on('error', () => {});
    const stream = session.request({ ':method': 'POST', ':path': '/csi.v1.Node/NodeGetInfo', 'content-type': 'application/grpc' });
    stream.on('error', () => {});
    stream.write(Buffer.from([0, 0, 0, 1, 0])); // a frame declaring 65,536 bytes, never sent
    const [headers] = await once(stream, 'response') as [http2.IncomingHttpHeaders];
    expect(headers).toMatchObject({ 'grpc-status': '4', 'grpc-message': expect.stringMatching(/did not arrive whole within 100 ms/) });
    session.destroy();
  });

  it('closes a connection that stays idle, or never gets past the preface', async () => {
    const { socket, c } = await serve({ NodeGetInfo: () => ({ nodeId: 'n' }) }, { idleTimeoutMs: 100, stopGraceMs: 100 });
    const raw = net.connect(socket);
    raw.on('error', () => {});
    raw.resume();
    await once(raw, 'close'); // sent nothing at all
    expect(await c.call('node', 'NodeGetInfo')).toMatchObject({ code: 0 }); // a client that reconnects is served
  });

  it('stop() closes a connection whose call never finishes, after the grace period', async () => {
    const { server, c } = await serve({ NodeGetInfo: () => new Promise<never>(() => {}) }, { stopGraceMs: 50 });
    const call = c.call('node', 'NodeGetInfo');
    await new Promise((r) => setTimeout(r, 50));
    await server.stop();
    servers.splice(servers.indexOf(server), 1);
    expect((await call).code).not.toBe(0);
  });
});
