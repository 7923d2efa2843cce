// What the harness reads of a process it started: its output as it comes, its first JSON log
// line with a given msg (how each of ours says it is serving), and a metric summed over the
// series that match from its /metrics text.

import type { ChildProcess } from 'node:child_process';
import { waitFor } from './wait.ts';

export interface Captured {
  /** Everything the child wrote so far, stdout and stderr interleaved. */
  text(): string;
  /** The child's first JSON log line whose msg is `msg`: waited for, or the child's exit and output as the error. */
  line(msg: string, what: string): Promise<Record<string, unknown>>;
}

export function capture(child: ChildProcess, name: string): Captured {
  let raw = '';
  child.stdout!.on('data', (d: Buffer) => (raw += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (raw += d.toString()));
  return {
    text: () => raw,
    line: (msg, what) => waitFor(() => {
      if (child.exitCode !== null) throw new Error(`${name} exited ${child.exitCode}:\n${raw}`);
      return raw.split('\n').map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return undefined; } }).find((l) => l?.msg === msg);
    }, { timeoutMs: 30_000, describe: what, diagnostics: () => raw.slice(-4000) }),
  };
}

/** The sum of metric `name`'s series whose line contains `labels`, in Prometheus' text format. */
export function metricSum(body: string, name: string, labels = ''): number {
  return body.split('\n').filter((l) => l.startsWith(name) && (l[name.length] === ' ' || l[name.length] === '{') && l.includes(labels))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}
