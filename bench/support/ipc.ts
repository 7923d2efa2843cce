// Request/response over a child's IPC channel, for the benchmark's probe processes.
// Probes run in their own processes so that the bench's own API writes and the two
// observers never share an event loop (each timestamp is taken by an idle loop).

import { fork, type ChildProcess } from 'node:child_process';

export interface Reply { id: number; [k: string]: unknown }

export class ProbeProcess {
  readonly child: ChildProcess;
  readonly #waiting = new Map<number, (r: Reply) => void>();
  #next = 1;
  readonly #exited: Promise<void>;

  constructor(script: string, args: string[] = []) {
    this.child = fork(script, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m: Reply) => {
      const done = this.#waiting.get(m.id);
      this.#waiting.delete(m.id);
      done?.(m);
    });
    this.#exited = new Promise((r) => this.child.once('exit', (code) => {
      for (const done of this.#waiting.values()) done({ id: -1, error: `probe ${script} exited ${code}` });
      this.#waiting.clear();
      r();
    }));
  }

  call<T = Reply>(op: string, body: object = {}): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#waiting.set(id, (r) => (r.error ? reject(new Error(String(r.error))) : resolve(r as unknown as T)));
      this.child.send({ ...body, op, id });
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
    await this.#exited;
  }
}

/** The child side: dispatches requests to handlers and sends their results back. */
export function serve(handlers: Record<string, (msg: Record<string, unknown>) => unknown>): void {
  process.on('message', (m: Record<string, unknown> & { id: number; op: string }) => {
    void (async () => {
      try {
        const h = handlers[m.op];
        if (!h) throw new Error(`unknown op ${m.op}`);
        process.send!({ id: m.id, ...((await h(m)) as object) });
      } catch (err) {
        process.send!({ id: m.id, error: (err as Error).stack ?? String(err) });
      }
    })();
  });
  process.on('disconnect', () => process.exit(0));
}
