// What the numbers were measured on: CPU, memory, kernel, versions, and the load.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(import.meta.dirname, '..', '..');

export function loadavg(): number[] {
  return os.loadavg().map((x) => Math.round(x * 100) / 100);
}

function version(pkg: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

export function machine(): Record<string, unknown> {
  return {
    cpu: os.cpus()[0]?.model ?? '?',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    packages: Object.fromEntries(['chokidar', 'pino', 'prom-client', 'yaml', '@kubernetes/client-node'].map((p) => [p, version(p)])),
  };
}

/** The commit measured, and the agent files that differed from it (a shared work tree). */
export function gitState(): { head: string; uncommittedAgentFiles: string[] } {
  const git = (...args: string[]) => execFileSync('git', ['-C', ROOT, ...args]).toString();
  try {
    return {
      head: git('rev-parse', '--short', 'HEAD').trim(),
      // Porcelain lines are "XY path": not trimmed, the status columns may be blanks.
      uncommittedAgentFiles: git('status', '--porcelain', '--', 'agent', 'projections').split('\n').filter(Boolean).map((l) => l.slice(3)),
    };
  } catch {
    return { head: '?', uncommittedAgentFiles: [] };
  }
}
