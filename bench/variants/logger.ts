// What-if shim (bench/variants/hook.ts, "logger"): the part of pino the agent uses, as a
// minimal JSON-lines logger (pino's line format: numeric level, time, base fields, msg;
// errors as type, message, stack, code). It answers "what would a hand-written logger
// save in RSS?". Lines are written synchronously to stdout, as pino does by default.

const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity } as const;
type Level = keyof typeof LEVELS;

function serialize(v: unknown): unknown {
  if (v instanceof Error) {
    const e = v as Error & { code?: unknown; cause?: unknown };
    return { type: e.name, message: e.message, stack: e.stack, ...(e.code !== undefined ? { code: e.code } : {}), ...(e.cause !== undefined ? { cause: serialize(e.cause) } : {}) };
  }
  return v;
}

class Logger {
  readonly #min: number;
  readonly #base: Record<string, unknown>;
  level: string;

  constructor(level: Level, base: Record<string, unknown>) {
    this.level = level;
    this.#min = LEVELS[level];
    this.#base = base;
  }

  #write(level: number, a: unknown, b?: string): void {
    if (level < this.#min) return;
    const [obj, msg] = typeof a === 'string' ? [{}, a] : [(a ?? {}) as Record<string, unknown>, b];
    const fields: Record<string, unknown> = { level, time: Date.now(), ...this.#base };
    for (const [k, v] of Object.entries(obj)) fields[k] = serialize(v);
    if (msg !== undefined) fields.msg = msg;
    process.stdout.write(`${JSON.stringify(fields)}\n`);
  }

  trace(a: unknown, b?: string): void { this.#write(10, a, b); }
  debug(a: unknown, b?: string): void { this.#write(20, a, b); }
  info(a: unknown, b?: string): void { this.#write(30, a, b); }
  warn(a: unknown, b?: string): void { this.#write(40, a, b); }
  error(a: unknown, b?: string): void { this.#write(50, a, b); }
  fatal(a: unknown, b?: string): void { this.#write(60, a, b); }

  child(bindings: Record<string, unknown>): Logger {
    return new Logger(this.level as Level, { ...this.#base, ...bindings });
  }
}

export function pino(o: { level?: string; base?: Record<string, unknown> } = {}): Logger {
  return new Logger((o.level ?? 'info') as Level, o.base ?? {});
}

export default pino;
