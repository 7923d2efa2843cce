// Temporary directory trees for writer and reconciler tests.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, lstatSync, readlinkSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh directory removed after the test. */
export function tmpDir(prefix = 'ownerrefs-'): string {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(d);
  return d;
}

/** Creates an emptyDir volume directory as the kubelet would; returns its path. */
export function makeVolume(root: string, uid: string, name = 'podinfo'): string {
  const dir = path.join(root, 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', name);
  mkdirSync(dir, { recursive: true, mode: 0o777 });
  return dir;
}

/** Snapshot of everything under dir (type, link target or content), to prove nothing changed. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = path.join(d, name);
      const st = lstatSync(p);
      if (st.isSymbolicLink()) out[p] = `link:${readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[p] = `dir:${(st.mode & 0o7777).toString(8)}`;
        walk(p);
      } else if (st.isFile()) out[p] = `file:${(st.mode & 0o7777).toString(8)}:${readFileSync(p, 'utf8')}`;
      else out[p] = 'other';
    }
  };
  walk(dir);
  return out;
}
