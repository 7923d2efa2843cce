// Polling for convergence. The bound is a "give up" limit, never a performance
// assertion: machines are shared and noisy.

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  describe?: string;
  /** Extra diagnostics appended to the timeout error (component logs, say). */
  diagnostics?: () => string | Promise<string>;
}

/** Polls fn until it returns something truthy; throws from fn count as "not yet". */
export async function waitFor<T>(fn: () => T | Promise<T>, opts: WaitOptions = {}): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 25));
  }
  const what = opts.describe ?? fn.toString().slice(0, 200);
  const last = lastError ? `\nlast error: ${(lastError as Error).stack ?? String(lastError)}` : '';
  const extra = opts.diagnostics ? `\n${await opts.diagnostics()}` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}${last}${extra}`);
}
