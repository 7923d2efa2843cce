// Bytes that several readers hold at once under one bound: the CSI socket's requests in
// flight (csi/grpc.ts) and the webhook's bodies being read (admission/webhook/server.ts). Each reader
// keeps count of what it took and gives exactly that back when it is done.

export class ByteBudget {
  readonly max: number;
  #used = 0;

  constructor(max: number) {
    this.max = max;
  }

  get used(): number {
    return this.#used;
  }

  /** Takes `n` more bytes if they fit under max; false, taking nothing, if not. */
  take(n: number): boolean {
    if (this.#used + n > this.max) return false;
    this.#used += n;
    return true;
  }

  /** Gives back `n` bytes taken before. */
  give(n: number): void {
    this.#used -= n;
  }
}
