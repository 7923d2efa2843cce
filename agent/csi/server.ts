// gRPC plumbing for CSI mode: serves unary handlers on unix sockets and turns thrown
// errors into gRPC statuses. The services and their codec are services.ts's.
//
// Only agent/csi/index.ts imports this, and agent.ts imports that one dynamically when
// --csi-socket is set: an agent in emptyDir mode never loads gRPC (memory).

import fs from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { errnoOf } from '../common/errors.ts';
import { Code, CsiError } from './driver.ts';

// Requests are tiny (a few paths and labels); a bound keeps a confused client from
// making the agent buffer megabytes.
const MAX_MESSAGE_BYTES = 256 * 1024;

/**
 * One service's handlers, by rpc name: request object in, response object (or a thrown
 * error) out. messages.ts types each service's map; here only the shape matters.
 */
export type Handlers = object;
type Handler = (request: unknown) => object | Promise<object>;

/** Counts each call by method and gRPC status code name. */
export type CallObserver = (method: string, code: string) => void;

export interface UnixServer {
  readonly socket: string;
  /** Finish in-flight calls (bounded), stop listening and remove the socket file. */
  stop(): Promise<void>;
}

export async function serveUnix(
  socket: string,
  services: [grpc.ServiceDefinition, Handlers][],
  observe: CallObserver = () => {},
): Promise<UnixServer> {
  await prepareSocket(socket);
  const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES });
  for (const [def, handlers] of services) {
    const impl: grpc.UntypedServiceImplementation = {};
    for (const method of Object.keys(def)) {
      const fn = (handlers as Record<string, Handler | undefined>)[method];
      if (fn) impl[method] = unary(method, fn, observe);
    }
    server.addService(def, impl);
  }
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
  });
  // Only root on the host (the kubelet) may call: NodePublishVolume writes into pod directories.
  await fs.chmod(socket, 0o600);
  return {
    socket,
    async stop() {
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5_000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      await fs.unlink(socket).catch(() => undefined);
    },
  };
}

function unary(method: string, fn: Handler, observe: CallObserver): grpc.handleUnaryCall<unknown, object> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => fn(call.request))
      .then((res) => {
        observe(method, 'OK');
        callback(null, res);
      }, (err: unknown) => {
        const e = err instanceof CsiError ? err : new CsiError(Code.Internal, err instanceof Error ? err.message : String(err), err);
        observe(method, grpc.status[e.code] ?? String(e.code));
        callback(Object.assign(new Error(e.message), { code: e.code, details: e.message }), null);
      });
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
