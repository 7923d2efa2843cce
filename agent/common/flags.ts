// Flags for a command, from one table: a flag wins over its environment variable, which wins
// over the default. Shared by `run` and `webhook`, so that both read, check and describe
// their flags the same way.

import { parseArgs } from 'node:util';
import { ConfigError } from './errors.ts';

/** Flag name -> env var, default, help (one line: --help prints it, docs/reference/command-line.md is generated from it). */
export interface FlagSpec {
  env: string;
  def: string;
  help: string;
}

export interface Flags<K extends string> {
  /** The value, from the command line, the environment or the default. */
  get(k: K): string;
  /** A number no smaller than `min`, or a ConfigError naming the flag. */
  num(k: K, min: number): number;
}

/** Reads `argv` and `env` against `table`. */
export function parseFlags<K extends string>(table: Readonly<Record<K, FlagSpec>>, argv: string[], env: NodeJS.ProcessEnv): Flags<K> {
  // parseArgs's own errors (ERR_PARSE_ARGS_*) are usage errors to main.ts, as they are.
  const { values } = parseArgs({
    args: argv,
    options: Object.fromEntries(Object.keys(table).map((k) => [k, { type: 'string' }])) as Record<K, { type: 'string' }>,
    strict: true,
    allowPositionals: false,
  });
  const given = values as Record<string, string | undefined>;
  const get = (k: K): string => given[k] ?? env[table[k].env] ?? table[k].def;
  return {
    get,
    num(k, min) {
      const n = Number(get(k));
      if (!Number.isFinite(n) || n < min) throw new ConfigError(`--${k} must be a number >= ${min}, got ${JSON.stringify(get(k))}`);
      return n;
    },
  };
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** --log-level's value, checked. */
export function logLevel(level: string): string {
  if (!LOG_LEVELS.includes(level)) throw new ConfigError(`--log-level must be one of trace, debug, info, warn, error, fatal; got ${JSON.stringify(level)}`);
  return level;
}

/**
 * `host:port`, for --health-addr and the webhook's --listen. An IPv6 host is written in
 * brackets (`[::1]:8080`) and returned without them. An empty host ('') means every address:
 * IPv6 and IPv4 where the host has IPv6 (a dual-stack pod), IPv4 alone where it has not.
 */
export function hostPort(flag: string, v: string): [string, number] {
  const m = /^(.*):(\d{1,5})$/.exec(v);
  if (!m || Number(m[2]) > 65535) throw new ConfigError(`--${flag} must be host:port with a port from 0 to 65535, got ${JSON.stringify(v)}`);
  return [m[1]!.replace(/^\[(.*)\]$/, '$1'), Number(m[2])];
}

/** How this machine reaches a server listening on `host` (a wildcard listens on loopback too), as a URL's host. */
export function localUrlHost(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** A command's --help: its usage, what it does, then each flag with its variable and default. */
export function flagHelp(usage: string, what: string, table: Readonly<Record<string, FlagSpec>>): string {
  const rows = Object.entries(table).map(([k, f]) => `  --${k.padEnd(22)} ${f.help}\n  ${' '.repeat(24)} env ${f.env}, default ${JSON.stringify(f.def)}`);
  return `Usage: ${usage}\n\n${what}\n\n${rows.join('\n')}\n`;
}
