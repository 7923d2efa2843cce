// Log tails for failure messages: a convergence timeout is far easier to debug
// with the last lines of every component next to it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export function tailFile(path: string, lines: number): string {
  try {
    const text = readFileSync(path, 'utf8');
    return text.split('\n').slice(-lines - 1).join('\n');
  } catch (err) {
    return `(unreadable: ${(err as Error).message})`;
  }
}

export function tailLogs(logsDir: string, lines = 20): string {
  if (!existsSync(logsDir)) return `(no logs dir ${logsDir})`;
  return readdirSync(logsDir)
    .filter((f) => f.endsWith('.log'))
    .sort()
    .map((f) => `--- ${f} (last ${lines} lines) ---\n${tailFile(join(logsDir, f), lines)}`)
    .join('\n');
}
