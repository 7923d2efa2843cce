/**
 * gRPC's wire protocol, server side, unary calls only, over node:http2 (no TLS: the
 * sockets are unix sockets only root can open). CSI and plugin registration have no
 * streaming rpcs, so this is all the agent needs from gRPC; @grpc/grpc-js did the same
 * for 3 MiB more per CSI-mode agent (docs/PERFORMANCE.md). Facts from the gRPC over
 * HTTP/2 specification (grpc/doc/PROTOCOL-HTTP2.md):
 *
 *   request   HEADERS  :method POST, :path /<package.Service>/<Method>,
 *                      content-type application/grpc[+proto|;...], te: trailers,
 *                      grpc-encoding (optional: identity is all we accept)
 *             DATA     one length-prefixed message:  flag (1 byte, 0 = not compressed)
 *                      | length (4 bytes, big-endian) | message bytes
 *   response  HEADERS  :status 200, content-type application/grpc
 *             DATA     one length-prefixed message
 *             HEADERS  (trailers) grpc-status 0
 *   error     one HEADERS frame, END_STREAM ("trailers-only"): :status 200, content-type,
 *             grpc-status <code>, grpc-message <percent-encoded UTF-8>
 *
 * A request that is not gRPC at all gets a plain HTTP status (405, 415), as the spec says.
 * Deadlines (grpc-timeout) are the client's to enforce: it resets the stream, and a reply
 * to a stream already gone is dropped. Handlers here are bounded by their own timeouts.
 */

import http2 from 'node:http2';
import { ByteBudget } from '../../common/budget.ts';
import { describe } from '../../common/validation.ts';
import { RpcError, Status as S, statusName, toRpcError } from './status.ts';

/** One unary rpc: request bytes in, response bytes out (or a thrown error). */
export type UnaryRoute = (request: Buffer) => Promise<Buffer>;

const PREFIX_BYTES = 5;

/** A message as it goes on the wire: not compressed, 4-byte big-endian length, the bytes. */
export function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, PREFIX_BYTES);
  return out;
}

/**
 * The one message of a unary request's body, or the status that refuses it: no message,
 * a truncated one, more than one, a compressed one (we never offer compression), or one
 * larger than `max` bytes.
 */
export function unframe(body: Buffer, max: number): Buffer | RpcError {
  if (body.length < PREFIX_BYTES) return new RpcError(S.INTERNAL, body.length === 0 ? 'request has no message' : 'request message prefix is truncated');
  if (body[0] === 1) return new RpcError(S.INTERNAL, 'request message is compressed, but no compression was negotiated');
  if (body[0] !== 0) return new RpcError(S.INTERNAL, `request message has an invalid flag byte ${body[0]}`);
  const length = body.readUInt32BE(1);
  if (length > max) return new RpcError(S.RESOURCE_EXHAUSTED, `request message is larger than the maximum (${length} > ${max} bytes)`);
  if (body.length < PREFIX_BYTES + length) return new RpcError(S.INTERNAL, 'request message is truncated');
  if (body.length > PREFIX_BYTES + length) return new RpcError(S.INTERNAL, 'a unary call got more than one request message');
  return body.subarray(PREFIX_BYTES);
}

/**
 * At most this many UTF-8 bytes of an error message go back: percent-encoded (up to three
 * times longer) it stays far below Node's 64 KiB bound on a header block, over which the
 * stream is reset and the status lost.
 */
const MAX_STATUS_MESSAGE_BYTES = 4096;

/** The message cut to MAX_STATUS_MESSAGE_BYTES of UTF-8, on a character boundary, marked with '…'. */
export function boundMessage(message: string): string {
  if (Buffer.byteLength(message) <= MAX_STATUS_MESSAGE_BYTES) return message;
  let out = '';
  let bytes = 3; // the ellipsis
  for (const ch of message) {
    bytes += Buffer.byteLength(ch);
    if (bytes > MAX_STATUS_MESSAGE_BYTES) break;
    out += ch;
  }
  return `${out}…`;
}

/** grpc-message: UTF-8 bytes outside printable ASCII, and '%', as %XX. */
export function percentEncode(message: string): string {
  let out = '';
  for (const b of Buffer.from(message, 'utf8')) {
    out += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** How `answer` reads and bounds a request, and whom it tells of a refusal. */
export interface AnswerOptions {
  maxMessageBytes: number;
  /** Shared by a server's streams, for requests being received or answered: one that would take it past max is refused (RESOURCE_EXHAUSTED). */
  budget?: ByteBudget;
  /** The whole body must arrive within this; default: no bound. */
  bodyTimeoutMs?: number;
  /**
   * A call refused by the protocol, before any handler (not gRPC, an unknown method, a bad
   * frame, too large, too slow): its status name (or HTTP_4xx) and a bounded message.
   */
  onRefused?: (code: string, message: string) => void;
}

/**
 * Answers one HTTP/2 stream as a unary gRPC call to `routes` (by :path). Never throws:
 * every outcome is a response on the stream, or nothing if the client has gone.
 */
export function answer(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, routes: ReadonlyMap<string, UnaryRoute>,
  { maxMessageBytes, budget = new ByteBudget(Infinity), bodyTimeoutMs = Infinity, onRefused = () => {} }: AnswerOptions): void {
  stream.on('error', () => {}); // the client reset the stream: there is no one to answer
  const refuse = (err: RpcError, extra: http2.OutgoingHttpHeaders = {}) => {
    onRefused(statusName(err.code), err.message);
    fail(stream, err, extra);
  };
  const refuseHttp = (status: number, message: string) => {
    onRefused(`HTTP_${status}`, message);
    plain(stream, status);
  };
  if (headers[':method'] !== 'POST') return refuseHttp(405, `method ${describe(String(headers[':method']))} is not POST`);
  const contentType = /^application\/grpc(?:\+([^;]*))?(?:;|$)/.exec(String(headers['content-type'] ?? ''));
  if (!contentType) return refuseHttp(415, `content-type ${describe(String(headers['content-type'] ?? ''))} is not gRPC`);
  if (contentType[1] !== undefined && contentType[1] !== 'proto') {
    return refuse(new RpcError(S.UNIMPLEMENTED, `content-subtype ${describe(contentType[1])} is not supported (proto only)`));
  }
  const encoding = headers['grpc-encoding'];
  if (encoding !== undefined && encoding !== 'identity') {
    return refuse(new RpcError(S.UNIMPLEMENTED, `grpc-encoding ${describe(String(encoding))} is not supported`), { 'grpc-accept-encoding': 'identity' });
  }
  const route = routes.get(String(headers[':path']));
  if (!route) return refuse(new RpcError(S.UNIMPLEMENTED, `unknown method ${describe(String(headers[':path']))}`));

  const chunks: Buffer[] = [];
  let size = 0;
  let refused = false;
  /** What this stream holds of the budget: its request's bytes, given back when the stream closes (the call answered, or the client gone). */
  let held = 0;
  const release = () => {
    budget.give(held);
    held = 0;
  };
  // A body that never ends would hold its buffer and a stream slot forever: the whole
  // request must arrive within bodyTimeoutMs (the handler's own time is not counted).
  const deadline = Number.isFinite(bodyTimeoutMs) ? setTimeout(() => {
    refused = true;
    chunks.length = 0;
    refuse(new RpcError(S.DEADLINE_EXCEEDED, `the request did not arrive whole within ${bodyTimeoutMs} ms`));
    stream.close(http2.constants.NGHTTP2_CANCEL);
  }, bodyTimeoutMs) : undefined;
  deadline?.unref();
  stream.once('close', () => {
    clearTimeout(deadline);
    release();
  });
  stream.on('data', (chunk: Buffer) => {
    if (refused) return;
    if (!budget.take(chunk.length)) {
      refused = true;
      chunks.length = 0;
      release();
      refuse(new RpcError(S.RESOURCE_EXHAUSTED, `requests being received hold ${budget.max} bytes already; retry`));
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
      return;
    }
    held += chunk.length;
    size += chunk.length;
    // Stop buffering as soon as the body cannot be one message within the bound.
    if (size > PREFIX_BYTES + maxMessageBytes) {
      refused = true;
      chunks.length = 0;
      release();
      refuse(new RpcError(S.RESOURCE_EXHAUSTED, `request message is larger than the maximum (${maxMessageBytes} bytes)`));
      // The reply is complete: stop the client's sending side too (RST_STREAM NO_ERROR), so a
      // client that never ends its body does not keep one of the connection's stream slots.
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
      return;
    }
    chunks.push(chunk);
  });
  stream.on('end', () => {
    clearTimeout(deadline);
    if (refused) return;
    const message = unframe(Buffer.concat(chunks, size), maxMessageBytes);
    chunks.length = 0; // still charged until the stream closes: the decoded request lives as long as its call
    if (message instanceof RpcError) return refuse(message);
    // Through a promise, so that a route throwing instead of rejecting is answered too.
    Promise.resolve(message).then(route).then((reply) => ok(stream, reply), (err: unknown) => fail(stream, toRpcError(err)));
  });
}

/** False if the client has reset or closed the stream: a reply would be dropped anyway. */
function open(stream: http2.ServerHttp2Stream): boolean {
  return !stream.destroyed && !stream.closed && !stream.headersSent;
}

function plain(stream: http2.ServerHttp2Stream, status: number): void {
  if (open(stream)) stream.respond({ ':status': status }, { endStream: true });
}

function ok(stream: http2.ServerHttp2Stream, reply: Buffer): void {
  if (!open(stream)) return;
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.end(frame(reply));
}

function fail(stream: http2.ServerHttp2Stream, err: RpcError, extra: http2.OutgoingHttpHeaders = {}): void {
  if (!open(stream)) return;
  stream.respond({
    ':status': 200, 'content-type': 'application/grpc', ...extra,
    'grpc-status': String(err.code), 'grpc-message': percentEncode(boundMessage(err.message)),
  }, { endStream: true });
}
