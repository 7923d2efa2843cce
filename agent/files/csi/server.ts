// CSI mode's sockets: serves the services' unary rpcs (services.ts) on unix sockets over
// node:http2, with gRPC's framing and statuses from grpc.ts, and turns thrown errors into
// statuses.
//
// Only agent/files/csi/start.ts imports this, and agent.ts imports that one dynamically when
// --csi-socket is set: an agent in emptyDir mode never loads HTTP/2 (memory).

import fs from 'node:fs/promises';
import http2 from 'node:http2';
import type net from 'node:net';
import path from 'node:path';
import { ByteBudget } from '../../common/budget.ts';
import { errnoOf } from '../../common/errors.ts';
import { answer, type UnaryRoute } from './grpc.ts';
import type { ServiceDefinition } from './services.ts';
import { statusName, toRpcError } from './status.ts';

// Requests are small (a few paths and labels), but a volume context carries the pod's own
// attributes, and a pod may be as large as etcd stores (1.5 MiB): this lets any pod's
// request through, while a confused client cannot make one stream buffer more.
export const MAX_MESSAGE_BYTES = 2 * 1024 * 1024;
// The requests of all calls being received or answered, together: sixteen of the largest,
// thousands of the usual few KiB (a publish may wait seconds for its pod).
const MAX_BUFFERED_BYTES = 32 * 1024 * 1024;
// The kubelet publishes a node's volumes in parallel; beyond this its client queues.
const MAX_CONCURRENT_STREAMS = 128;
// How long stop() lets in-flight calls finish before closing their connections.
const STOP_GRACE_MS = 5_000;
// A request's body must arrive whole within this (the kubelet sends a few hundred bytes at once).
const BODY_TIMEOUT_MS = 30_000;
// A connection with no frames for this long is closed (GOAWAY; the kubelet's gRPC client
// reconnects on its next call), and so is one that never completes the HTTP/2 preface.
const IDLE_TIMEOUT_MS = 300_000;
// The kubelet dials a connection per call, and a node's publishes wait for their pods in
// parallel (after a reboot, every volume at once): well above max pods x volumes. The socket
// is root's only, so this only bounds a confused root process.
const MAX_CONNECTIONS = 1024;

export interface ServeOptions {
  observe?: CallObserver;
  /** A listening socket's error after start (accepting failed); default: ignored. */
  onError?: (err: unknown) => void;
  /** A call refused by the protocol, before any handler (grpc.ts AnswerOptions); it is also observed as method "refused". */
  onRefused?: (code: string, message: string) => void;
  /** Default STOP_GRACE_MS. */
  stopGraceMs?: number;
  /** Defaults BODY_TIMEOUT_MS, IDLE_TIMEOUT_MS and MAX_BUFFERED_BYTES; tests shorten them. */
  bodyTimeoutMs?: number;
  idleTimeoutMs?: number;
  maxBufferedBytes?: number;
}

/**
 * One service's handlers, by rpc name: request object in, response object (or a thrown
 * error) out. messages.ts types each service's map; here only the shape matters.
 */
export type Handlers = object;
type Handler = (request: Record<string, unknown>) => object | Promise<object>;

/** Counts each call by method and gRPC status code name. */
export type CallObserver = (method: string, code: string) => void;

export interface UnixServer {
  readonly socket: string;
  /** Finish in-flight calls (bounded), stop listening and remove the socket file. */
  stop(): Promise<void>;
}

export async function serveUnix(
  socket: string,
  services: [ServiceDefinition, Handlers][],
  { observe = () => {}, onError = () => {}, onRefused = () => {}, stopGraceMs = STOP_GRACE_MS, bodyTimeoutMs = BODY_TIMEOUT_MS, idleTimeoutMs = IDLE_TIMEOUT_MS, maxBufferedBytes = MAX_BUFFERED_BYTES }: ServeOptions = {},
): Promise<UnixServer> {
  const routes = new Map<string, UnaryRoute>();
  for (const [def, handlers] of services) {
    for (const [method, rpc] of Object.entries(def)) {
      const fn = (handlers as Record<string, Handler | undefined>)[method];
      // An rpc without a handler is answered UNIMPLEMENTED, as for an unknown path.
      if (fn) routes.set(rpc.path, unary(method, rpc, fn, observe));
    }
  }
  await prepareSocket(socket);
  const sessions = new Set<http2.ServerHttp2Session>();
  // The raw connections too: a peer that never reads or closes keeps a closed session's socket
  // open (Node ends it and waits for the peer), so stop() destroys the sockets themselves.
  const connections = new Set<net.Socket>();
  const server = http2.createServer({ settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS } });
  server.maxConnections = MAX_CONNECTIONS;
  server.on('connection', (c: net.Socket) => {
    connections.add(c);
    c.once('close', () => connections.delete(c));
  });
  server.on('session', (s: http2.ServerHttp2Session) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
    // Idle (or never past the preface): GOAWAY, then cut a peer that does not close in turn.
    s.setTimeout(idleTimeoutMs, () => {
      s.close();
      setTimeout(() => s.destroy(), stopGraceMs).unref();
    });
  });
  // A client that does not speak HTTP/2 loses its own connection; nothing else is affected.
  server.on('sessionError', () => {});
  const refused = (code: string, message: string) => {
    observe('refused', code); // not by path: a client could make one series per name
    onRefused(code, message);
  };
  const budget = new ByteBudget(maxBufferedBytes);
  server.on('stream', (stream, headers) => answer(stream, headers, routes, { maxMessageBytes: MAX_MESSAGE_BYTES, budget, bodyTimeoutMs, onRefused: refused }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => {
      server.off('error', reject);
      server.on('error', onError);
      resolve();
    });
  });
  // Only root on the host (the kubelet) may call: NodePublishVolume writes into pod directories.
  await fs.chmod(socket, 0o600);
  return {
    socket,
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // GOAWAY: the kubelet opens no new calls here; the ones in flight finish.
      for (const s of sessions) s.close();
      const force = setTimeout(() => {
        for (const s of sessions) s.destroy();
        for (const c of connections) c.destroy();
      }, stopGraceMs);
      await closed;
      clearTimeout(force);
      await fs.unlink(socket).catch(() => undefined);
    },
  };
}

function unary(method: string, rpc: ServiceDefinition[string], fn: Handler, observe: CallObserver): UnaryRoute {
  return async (bytes) => {
    try {
      const reply = rpc.encode(await fn(rpc.decode(bytes)));
      observe(method, 'OK');
      return reply;
    } catch (err) {
      const e = toRpcError(err);
      observe(method, statusName(e.code));
      throw e;
    }
  };
}

/** A socket left by an earlier run is replaced; anything else at the path is refused, never deleted. */
async function prepareSocket(socket: string): Promise<void> {
  await fs.mkdir(path.dirname(socket), { recursive: true, mode: 0o750 });
  try {
    const st = await fs.lstat(socket);
    if (!st.isSocket()) throw new Error(`${socket} exists and is not a socket; refusing to replace it`);
    await fs.unlink(socket);
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err;
  }
}
