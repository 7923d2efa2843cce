// Shared helpers for the security tests (issue 5): an "outside" tree of sentinels a
// hostile pod would love to reach, a snapshot strict enough to notice any write to it,
// and the failure reasons the agent documents.

import { execFileSync, spawn } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { FAILURE_REASONS, ProjectionError, type FailureReason } from '../../agent/common/errors.ts';
import { TEMP_PREFIX } from '../../agent/files/volume/writer.ts';
import { ALL_FILE_NAMES } from '../../projections/index.ts';

/** Every name the writer uses in a volume: the final files and their temporaries. */
export const WRITER_NAMES: readonly string[] = [...ALL_FILE_NAMES, ...ALL_FILE_NAMES.map((n) => TEMP_PREFIX + n)];

/** The reasons README's Event table documents (what a pod author may see). */
export const EVENT_REASONS: readonly FailureReason[] = (Object.keys(FAILURE_REASONS) as FailureReason[]).filter((r) => r !== 'VolumeNotFound');

/**
 * Everything under dir, as strings that change if anything is written, created, removed,
 * re-moded, re-owned or touched: type, mode, owner, size, mtime (ns) and content or link
 * target. Directory mtimes catch a file created and deleted again.
 */
export function deepSnapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    const st = lstatSync(p, { bigint: true });
    const head = `${(Number(st.mode) & 0o7777).toString(8)} ${st.uid}:${st.gid} ${st.size} m${st.mtimeNs}`;
    if (st.isSymbolicLink()) out[p] = `link ${head} -> ${readlinkSync(p)}`;
    else if (st.isFile()) out[p] = `file ${head} ${readFileSync(p).toString('base64')}`;
    else if (st.isDirectory()) {
      out[p] = `dir ${head}`;
      for (const name of readdirSync(p).sort()) walk(path.join(p, name));
    } else out[p] = `other ${head}`;
  };
  walk(dir);
  return out;
}

export interface Outside {
  dir: string;
  /** A 0600 file, as host credentials would be. */
  secret: string;
  /** A 0644 file with exactly `sameSize` bytes, so the writer's size pre-check passes. */
  lookalike: string;
  /** A directory with a file in it. */
  subdir: string;
  /** A path that does not exist: a dangling link's target, never to be created. */
  absent: string;
  /** A FIFO, for hard links of a FIFO into the volume. */
  fifo: string;
}

/** Builds the sentinel tree beside the kubelet root. `sameSize`: size of a file the writer wants. */
export function makeOutside(base: string, sameSize = 64): Outside {
  const dir = path.join(base, 'outside');
  mkdirSync(path.join(dir, 'sub'), { recursive: true });
  const o: Outside = {
    dir,
    secret: path.join(dir, 'secret'),
    lookalike: path.join(dir, 'lookalike'),
    subdir: path.join(dir, 'sub'),
    absent: path.join(dir, 'created-by-following-a-link'),
    fifo: path.join(dir, 'fifo'),
  };
  writeFileSync(o.secret, 'host credentials', { mode: 0o600 });
  writeFileSync(o.lookalike, 'L'.repeat(sameSize), { mode: 0o644 });
  writeFileSync(path.join(o.subdir, 'inner'), 'inner host data', { mode: 0o644 });
  execFileSync('mkfifo', ['-m', '0644', o.fifo]);
  symlinkSync(o.secret, path.join(dir, 'link-to-secret'));
  return o;
}

/** The error of a promise that must reject with a ProjectionError. */
export async function projectionError(p: Promise<unknown>): Promise<ProjectionError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProjectionError);
  return err as ProjectionError;
}

export interface AttackerStats {
  ops: number;
  byOp: Record<string, number>;
  failed: number;
}

/**
 * Starts race-attacker.ts in its own process: `iterations` random entry swaps in `vol`
 * (files, directories, FIFOs, symlinks and hard links to `outside`). Resolves once the
 * attacker is running; `done` resolves with its statistics when it has finished.
 */
export async function startAttacker(vol: string, outside: Outside, iterations: number, seed: number):
Promise<{ done: Promise<AttackerStats>; finished: () => boolean }> {
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'race-attacker.ts'),
    JSON.stringify({ vol, names: WRITER_NAMES, outside, iterations, seed })], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let finished = false;
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const done = new Promise<AttackerStats>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      finished = true;
      if (code !== 0) reject(new Error(`attacker exited ${code}: ${out}`));
      else resolve(JSON.parse(out.slice(out.indexOf('\n') + 1)) as AttackerStats);
    });
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    done.catch(reject);
  });
  return { done, finished: () => finished };
}
