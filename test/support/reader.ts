// Runs reader-loop.ts in a child process for the duration of a test body.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface ReaderStats {
  reads: number;
  missing: number;
  torn: number;
  samples: string[];
}

/** Starts a reader over `allowed` (file -> acceptable contents); stop() returns what it saw. */
export async function startReader(allowed: Record<string, string[]>): Promise<{ stop(): Promise<ReaderStats> }> {
  const spec = path.join(mkdtempSync(path.join(os.tmpdir(), 'reader-')), 'allowed.json');
  writeFileSync(spec, JSON.stringify(allowed));
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'reader-loop.ts'), spec], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', () => resolve());
  });
  return {
    async stop() {
      child.stdin.end();
      await new Promise((r) => child.once('exit', r));
      return JSON.parse(out.slice(out.indexOf('\n') + 1)) as ReaderStats;
    },
  };
}
