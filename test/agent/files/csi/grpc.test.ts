// gRPC's wire protocol as agent/files/csi/grpc.ts speaks it, seen from a raw HTTP/2 client: the
// framing, the statuses, and every malformed request a client could send. The happy path
// against real gRPC clients is server.test.ts's (grpc-js), csi-sanity's and the kubelet's (grpc-go).
import http2 from 'node:http2';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answer, frame, percentEncode, unframe, type UnaryRoute } from '../../../../agent/files/csi/grpc.ts';
import { RpcError } from '../../../../agent/files/csi/status.ts';

const MAX = 64;

describe('unframe', () => {
  const prefix = (flag: number, length: number) => Buffer.from([flag, length >>> 24, (length >>> 16) & 255, (length >>> 8) & 255, length & 255]);
  it.each<[string, Buffer, number | null, RegExp | null]>([
    ['one message', Buffer.concat([prefix(0, 3), Buffer.from('abc')]), null, null],
    ['an empty message', prefix(0, 0), null, null],
    ['no body at all', Buffer.alloc(0), 13, /no message/],
    ['a truncated prefix', Buffer.from([0, 0, 0]), 13, /prefix is truncated/],
    ['a truncated message', Buffer.concat([prefix(0, 5), Buffer.from('ab')]), 13, /message is truncated/],
    ['two messages', Buffer.concat([prefix(0, 1), Buffer.from('a'), prefix(0, 1), Buffer.from('b')]), 13, /more than one/],
    ['the compressed flag', Buffer.concat([prefix(1, 1), Buffer.from('a')]), 13, /compressed/],
    ['a flag byte that is neither 0 nor 1', Buffer.concat([prefix(2, 1), Buffer.from('a')]), 13, /flag/],
    ['a declared length over the bound', prefix(0, MAX + 1), 8, /larger than the maximum \(65 > 64/],
    ['a 4 GiB declared length', prefix(0, 0xffffffff), 8, /larger than the maximum/],
  ])('%s', (_name, body, code, message) => {
    const out = unframe(body, MAX);
    if (code === null) {
      expect(out).toBeInstanceOf(Buffer);
      expect(Buffer.compare(frame(out as Buffer), body)).toBe(0);
    } else {
      expect(out).toBeInstanceOf(RpcError);
      expect((out as RpcError).code).toBe(code);
      expect((out as RpcError).message).toMatch(message!);
    }
  });
});

describe('percentEncode (grpc-message)', () => {
  it.each([
    ['plain printable ASCII', 'target_path is required: /a b', 'target_path is required: /a b'],
    ['the percent sign itself', '100%', '100%25'],
    ['a newline (never a header of its own)', 'a\r\nb: c', 'a%0D%0Ab: c'],
    ['UTF-8, byte by byte', 'ünï ✓', '%C3%BCn%C3%AF %E2%9C%93'],
    ['DEL and control bytes', '\u007f\u0000', '%7F%00'],
  ])('%s', (_name, input, want) => {
    expect(percentEncode(input)).toBe(want);
    expect(decodeURIComponent(percentEncode(input))).toBe(input);
  });
});

// One server for the wire tests: /t.S/Echo echoes, /t.S/Fail throws what the request says.
const routes = new Map<string, UnaryRoute>([
  ['/t.S/Echo', async (b) => b],
  ['/t.S/Sync', (() => { throw new Error('thrown before any promise'); }) as UnaryRoute],
  ['/t.S/Fail', async (b) => {
    if (b.toString() === 'plain') throw new Error('plain failure');
    if (b.toString() === 'long') throw new RpcError(5, `${'é'.repeat(40_000)}end`);
    throw new RpcError(5, 'gone: ünï 100%');
  }],
]);
let server: http2.Http2Server;
/** What answer reported as refused by the protocol, in order. */
const refusals: string[] = [];
let socket: string;
beforeAll(async () => {
  socket = path.join(mkdtempSync(path.join(os.tmpdir(), 'grpc-wire-')), 's.sock');
  server = http2.createServer();
  server.on('stream', (stream, headers) => answer(stream, headers, routes, { maxMessageBytes: MAX, onRefused: (code, message) => refusals.push(`${code} ${message}`) }));
  await new Promise<void>((r) => server.listen(socket, r));
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

interface Reply { headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; body: Buffer }

/** One request on a fresh connection; the reply's headers, trailers and body. */
async function request(headers: http2.OutgoingHttpHeaders, body: Buffer[] = []): Promise<Reply> {
  const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
  try {
    return await new Promise<Reply>((resolve, reject) => {
      const req = session.request({ ':method': 'POST', 'content-type': 'application/grpc', te: 'trailers', ...headers });
      let head: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      req.on('response', (h) => { head = h; });
      req.on('trailers', (t) => { trailers = t; });
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve({ headers: head, trailers, body: Buffer.concat(chunks) }));
      req.on('error', reject);
      for (const b of body) req.write(b);
      req.end();
    });
  } finally {
    session.close();
  }
}

const msg = (s: string | Buffer) => frame(Buffer.isBuffer(s) ? s : Buffer.from(s));

describe('answer', () => {
  it('answers a unary call: 200, application/grpc, one framed message, grpc-status 0 in the trailers', async () => {
    const r = await request({ ':path': '/t.S/Echo' }, [msg('hello')]);
    expect(r.headers[':status']).toBe(200);
    expect(r.headers['content-type']).toBe('application/grpc');
    expect(r.headers['grpc-status']).toBeUndefined();
    expect(r.body).toEqual(msg('hello'));
    expect(r.trailers['grpc-status']).toBe('0');
  });

  it('takes a message split across many DATA frames, and content-type with a suffix', async () => {
    const whole = msg('0123456789');
    const r = await request({ ':path': '/t.S/Echo', 'content-type': 'application/grpc+proto' }, [...whole].map((b) => Buffer.from([b])));
    expect(r.body).toEqual(whole);
    expect(r.trailers['grpc-status']).toBe('0');
  });

  // Trailers-only: one HEADERS frame carries the status.
  it.each<[string, http2.OutgoingHttpHeaders, Buffer[], string, RegExp]>([
    ['an unknown method', { ':path': '/t.S/Nope' }, [msg('x')], '12', /unknown method "\/t\.S\/Nope"/],
    ['a compression the server never offered', { ':path': '/t.S/Echo', 'grpc-encoding': 'gzip' }, [msg('x')], '12', /grpc-encoding "gzip"/],
    ['no message', { ':path': '/t.S/Echo' }, [], '13', /no message/],
    ['two messages on a unary call', { ':path': '/t.S/Echo' }, [msg('a'), msg('b')], '13', /more than one/],
    ['a compressed message', { ':path': '/t.S/Echo' }, [Buffer.from([1, 0, 0, 0, 1, 0])], '13', /compressed/],
    ['a declared length over the bound', { ':path': '/t.S/Echo' }, [Buffer.from([0, 0, 0, 1, 0])], '8', /larger than the maximum/],
    ['a body over the bound, sent in pieces', { ':path': '/t.S/Echo' }, Array.from({ length: 40 }, () => Buffer.alloc(8)), '8', /larger than the maximum/],
    ['a handler\'s RpcError: its code, its message percent-encoded', { ':path': '/t.S/Fail' }, [msg('x')], '5', /^gone: %C3%BCn%C3%AF 100%25$/],
    ['any other thrown error', { ':path': '/t.S/Fail' }, [msg('plain')], '13', /^plain failure$/],
    ['a route that throws instead of rejecting', { ':path': '/t.S/Sync' }, [msg('x')], '13', /^thrown before any promise$/],
    ['a content-subtype other than proto', { ':path': '/t.S/Echo', 'content-type': 'application/grpc+json' }, [msg('x')], '12', /content-subtype "json"/],
  ])('refuses with a status: %s', async (_name, headers, body, status, message) => {
    const r = await request(headers, body);
    expect(r.headers[':status']).toBe(200);
    expect(r.headers['content-type']).toBe('application/grpc');
    expect(r.headers['grpc-status']).toBe(status);
    expect(String(r.headers['grpc-message'])).toMatch(message);
    expect(r.body.length).toBe(0);
  });

  // Node refuses a header block over 64 KiB and resets the stream: the status would be lost.
  it('cuts a long error message to 4 KiB of UTF-8 (whole characters) and keeps its status', async () => {
    const r = await request({ ':path': '/t.S/Fail' }, [msg('long')]);
    expect(r.headers['grpc-status']).toBe('5');
    const text = decodeURIComponent(String(r.headers['grpc-message']));
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(4096);
    expect(text).toMatch(/^(é)+…$/);
  });

  it.each<[string, http2.OutgoingHttpHeaders, Buffer[], string | undefined]>([
    ['an unknown method, its path quoted and escaped', { ':path': '/t.S/"No' + 'p'.repeat(100) }, [msg('x')], `UNIMPLEMENTED unknown method "/t.S/\\"No${'p'.repeat(72)}…(108 chars)"`],
    ['a GET', { ':method': 'GET', ':path': '/t.S/Echo' }, [], 'HTTP_405 method "GET" is not POST'],
    ['a body that is not one message', { ':path': '/t.S/Echo' }, [], 'INTERNAL request has no message'],
    ['a body over the bound', { ':path': '/t.S/Echo' }, [Buffer.from([0, 0, 0, 1, 0])], `RESOURCE_EXHAUSTED request message is larger than the maximum (256 > ${MAX} bytes)`],
    ['not a handler\'s error: that is an answer, not a refusal', { ':path': '/t.S/Fail' }, [msg('x')], undefined],
  ])('reports a call the protocol refuses: %s', async (_name, headers, body, reported) => {
    refusals.length = 0;
    await request(headers, body);
    expect(refusals).toEqual(reported === undefined ? [] : [reported]);
  });

  it('says which encoding it accepts when refusing one', async () => {
    const r = await request({ ':path': '/t.S/Echo', 'grpc-encoding': 'gzip' }, [msg('x')]);
    expect(r.headers['grpc-accept-encoding']).toBe('identity');
  });

  it.each<[string, http2.OutgoingHttpHeaders, number]>([
    ['a GET', { ':method': 'GET', ':path': '/t.S/Echo' }, 405],
    ['a POST that is not gRPC', { ':path': '/t.S/Echo', 'content-type': 'application/json' }, 415],
    ['a content type that only starts like gRPC', { ':path': '/t.S/Echo', 'content-type': 'application/grpcx' }, 415],
  ])('answers %s with plain HTTP %i', async (_name, headers, status) => {
    const r = await request(headers, headers[':method'] === 'GET' ? [] : [msg('x')]);
    expect(r.headers[':status']).toBe(status);
    expect(r.headers['grpc-status']).toBeUndefined();
  });

  // Refused before the body is read (unknown method, wrong content type): the complete reply
  // ends the stream (RST_STREAM NO_ERROR after it), so a client sending more than HTTP/2's
  // 64 KiB window is not left blocked on flow control.
  it.each<[string, http2.OutgoingHttpHeaders]>([
    ['an unknown method', { ':path': '/t.S/Nope' }],
    ['a POST that is not gRPC', { ':path': '/t.S/Echo', 'content-type': 'application/json' }],
  ])('lets a client finish sending a large body to %s', async (_name, headers) => {
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    try {
      const req = session.request({ ':method': 'POST', 'content-type': 'application/grpc', ...headers });
      req.on('error', () => {});
      req.resume();
      const closed = new Promise<void>((r) => req.on('close', () => r()));
      req.end(Buffer.alloc(300 * 1024));
      await closed;
      expect(req.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      session.close();
    }
  });

  // Refused mid-body: the client's sending side is closed too, or a client that never ends
  // its body would hold one of the connection's stream slots.
  it('closes a stream refused mid-body, even if the client never ends it', async () => {
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    try {
      const req = session.request({ ':method': 'POST', ':path': '/t.S/Echo', 'content-type': 'application/grpc' });
      req.on('error', () => {});
      req.resume();
      const closed = new Promise<void>((r) => req.on('close', () => r()));
      let status: unknown;
      req.on('response', (h) => { status = h['grpc-status']; });
      req.write(Buffer.alloc(MAX * 4)); // never ended
      await closed;
      expect(status).toBe('8');
    } finally {
      session.close();
    }
  });

  it('keeps serving after a client resets its stream mid-message', async () => {
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    const req = session.request({ ':method': 'POST', ':path': '/t.S/Echo', 'content-type': 'application/grpc' });
    req.on('error', () => {});
    req.write(Buffer.from([0, 0, 0, 9, 1]));
    await new Promise((r) => setTimeout(r, 20));
    req.close(http2.constants.NGHTTP2_CANCEL);
    session.close();
    const r = await request({ ':path': '/t.S/Echo' }, [msg('after')]);
    expect(r.body).toEqual(msg('after'));
  });
});
