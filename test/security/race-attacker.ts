// The hostile pod, as a separate process: swaps the entries of a volume directory
// between regular files, directories, FIFOs, symlinks and hard links pointing outside,
// and renames them onto each other, for a fixed number of iterations (not a duration).
// argv[2]: JSON {vol, names, outside: {secret, lookalike, subdir, absent, fifo}, iterations, seed}.
// Prints "ready", then one line of JSON statistics when done.
//
// It never writes through a name: entries are created with O_EXCL|O_NOFOLLOW, links and
// renames never follow the final component, and removal is unlink/rmdir only, so
// anything that changes outside was changed by the agent, not by this script.

import { closeSync, constants as C, linkSync, mkdirSync, openSync, renameSync, rmdirSync, symlinkSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

interface Args {
  vol: string;
  names: string[];
  outside: { secret: string; lookalike: string; subdir: string; absent: string; fifo: string };
  iterations: number;
  seed: number;
}
const a = JSON.parse(process.argv[2]!) as Args;

// mulberry32: a reproducible sequence per seed.
let s = a.seed >>> 0;
const rand = (): number => {
  s = (s + 0x6d2b79f5) >>> 0;
  let t = s;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const at = (name: string) => path.join(a.vol, name);

/** unlink, or empty and rmdir a directory this script planted (never recursive). */
function remove(p: string): void {
  try {
    unlinkSync(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EPERM') return;
    try { unlinkSync(path.join(p, 'inner')); } catch { /* none */ }
    try { rmdirSync(p); } catch { /* not empty or gone */ }
  }
}

function createFile(p: string, bytes: string, mode: number): void {
  const fd = openSync(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
  try { writeSync(fd, bytes); } finally { closeSync(fd); }
}

const ops: Record<string, (name: string) => void> = {
  symlinkToFile: (n) => { remove(at(n)); symlinkSync(pick([a.outside.secret, a.outside.lookalike]), at(n)); },
  symlinkToDir: (n) => { remove(at(n)); symlinkSync(a.outside.subdir, at(n)); },
  danglingSymlink: (n) => { remove(at(n)); symlinkSync(a.outside.absent, at(n)); },
  relativeSymlink: (n) => { remove(at(n)); symlinkSync(path.relative(a.vol, a.outside.secret), at(n)); },
  hardlink: (n) => { remove(at(n)); linkSync(pick([a.outside.secret, a.outside.lookalike]), at(n)); },
  fifo: (n) => { remove(at(n)); linkSync(a.outside.fifo, at(n)); },
  dir: (n) => { remove(at(n)); mkdirSync(at(n)); if (rand() < 0.5) createFile(path.join(at(n), 'inner'), 'x', 0o644); },
  file: (n) => { remove(at(n)); createFile(at(n), 'attacker'.repeat(1 + Math.floor(rand() * 20)), pick([0o644, 0o600, 0o777])); },
  rename: (n) => renameSync(at(n), at(pick(a.names))),
  unlink: (n) => remove(at(n)),
};
const opNames = Object.keys(ops);

const stats = { ops: 0, byOp: {} as Record<string, number>, failed: 0 };
process.stdout.write('ready\n');
for (let i = 0; i < a.iterations; i++) {
  const op = pick(opNames);
  stats.ops++;
  stats.byOp[op] = (stats.byOp[op] ?? 0) + 1;
  try {
    ops[op]!(pick(a.names));
  } catch {
    stats.failed++; // the agent (or an earlier op) got there first: expected in a race
  }
}
process.stdout.write(JSON.stringify(stats));
