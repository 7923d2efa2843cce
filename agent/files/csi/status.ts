// gRPC status codes (grpc/doc/statuscodes.md) and the error that carries one: what a
// handler throws (driver.ts's CsiError is one) and what grpc.ts puts on the wire. Apart
// from grpc.ts so that importing the driver's names (the webhook, `render`) loads no HTTP/2.

/** Status names by code; the names are what metrics show. */
const STATUS_NAMES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS',
  'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE',
  'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED',
] as const;

/** The codes the wire protocol itself answers with (handlers bring their own). */
export const Status = { DEADLINE_EXCEEDED: 4, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, INTERNAL: 13 } as const;

export function statusName(code: number): string {
  return STATUS_NAMES[code] ?? String(code);
}

/** An error answered with its own status; any other error is answered INTERNAL. */
export class RpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'RpcError';
    this.code = code;
  }
}

/** What a thrown value is answered with: its own status if it carries one, else INTERNAL. */
export function toRpcError(err: unknown): RpcError {
  if (err instanceof RpcError) return err;
  return new RpcError(Status.INTERNAL, err instanceof Error ? err.message : String(err), err);
}
