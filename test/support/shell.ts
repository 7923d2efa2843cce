// Sources an env file with a real POSIX shell, as a pod would.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Runs `set -a; . FILE` in /bin/sh and returns the value of `name`, exactly. */
export function sourceEnv(content: string, name = 'OWNER_REFERENCES'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'envfile-'));
  const file = path.join(dir, 'env');
  try {
    writeFileSync(file, content);
    return execFileSync('/bin/sh', ['-c', `set -a; . "$1"; printf %s "$${name}"`, 'sh', file], { cwd: dir }).toString('utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
