// File probe (child process): records, per pod, the first moment its projected
// `ownerReferences` file holds the expected bytes. inotify (fs.watch on each volume
// directory) wakes it on the agent's rename; the time is taken when the event is
// delivered, before the read that confirms the bytes.
//
// It also records the file's ctime, which the agent's rename set: when the file landed,
// by the kernel's clock, however late this process was woken. The difference is the
// probe's own lag. The rename's ctime is fine-grained only where the kernel stamps an
// inode whose times were queried with a fine-grained time (multigrain timestamps, Linux
// 6.13+; the writer's fstat of the temporary, step 5, is that query); on older kernels it
// is up to a clock tick (1 to 4 ms) early.
//
// Quiet mode (`arm` with quiet: true; the bench's default, `--no-quiet-probe` for the watch): no watch at all while
// the agent works. inotify wakes this process on every event of the agent's own writes (four
// per file: the temporary's create, write and move, and the name's), and on two shared cores a
// woken process takes the CPU from the agent it measures. Instead `wait` scans the files once
// the caller says the burst is over, and each file's landing is its ctime; the scan's own
// timing then does not matter.

import { lstat, readFile } from 'node:fs/promises';
import { fstatSync, lstatSync, mkdtempSync, openSync, closeSync, renameSync, rmSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { serve } from '../support/ipc.ts';
import { nowMs } from '../support/stats.ts';

const FILE = 'ownerReferences';
const OURS = new Set(['ownerReferences', 'ownerReferences.env', 'dependentOwnerReferences']);

interface Item { key: string; dir: string; expected: string }

const watchers = new Map<string, FSWatcher>();
let byDir = new Map<string, Item>();
let seen = new Map<string, number>();
/** Key -> the file's ctime on the monotonic clock of nowMs(). */
let landed = new Map<string, number>();
let events = 0;
let waiter: (() => void) | undefined;
/** Armed quiet: no watches; `wait` scans. */
let quiet = false;
/** Kubelet roots whose file system was found to give fine-grained ctimes. */
const checkedFine = new Set<string>();
const SCAN_EVERY_MS = 100;

/**
 * Wall clock minus nowMs(), fixed at start: performance.timeOrigin is the wall clock then,
 * and performance.now() and nowMs() both run on CLOCK_MONOTONIC, so the difference is a
 * constant. Of a few paired reads the largest is the least delayed between its two reads.
 * A wall clock stepped or slewed during the run would shift it; probeLagMs's minimum, which
 * cannot be negative, shows that.
 */
const WALL_MINUS_MONOTONIC = performance.timeOrigin + Math.max(...Array.from({ length: 9 }, () => performance.now() - nowMs()));

async function check(item: Item, at: number): Promise<void> {
  if (seen.has(item.key)) return;
  let text: string;
  try {
    text = await readFile(path.join(item.dir, FILE), 'utf8');
  } catch {
    return; // not there yet
  }
  if (text !== item.expected || seen.has(item.key) || byDir.get(item.dir) !== item) return;
  // The bench renames each file once per round (with following on, a handful twice: the
  // ctime is then of a later rename than the bytes read, so it lands late, never early).
  const st = await lstat(path.join(item.dir, FILE)).catch(() => null);
  // A check from the round before, still in flight when the next was armed, records nothing.
  if (seen.has(item.key) || byDir.get(item.dir) !== item) return;
  seen.set(item.key, at);
  if (st) landed.set(item.key, st.ctimeMs - WALL_MINUS_MONOTONIC);
  if (seen.size === byDir.size) waiter?.();
}

function ensureWatch(dir: string): void {
  if (watchers.has(dir)) return;
  watchers.set(dir, watch(dir, { persistent: true }, (_ev, name) => {
    const at = nowMs();
    if (name && (OURS.has(name) || name.startsWith('.ownerrefs-tmp.'))) events++;
    if (name !== FILE) return;
    const item = byDir.get(dir);
    if (item) void check(item, at);
  }));
}

/**
 * Whether renames in `dir`'s file system get fine-grained ctimes (multigrain timestamps): the
 * quiet mode's only clock. Ten renames in a row, each after an fstat that asks for a fine
 * time, as the writer's step 5 does: fine-grained ctimes all differ, by tens of microseconds;
 * coarse ones repeat a tick's value or jump by a tick (1 to 4 ms), up to a tick early.
 */
export function fineCtimes(dir: string): boolean {
  const tmp = mkdtempSync(path.join(dir, '.ctime-check-'));
  try {
    const ctimes: bigint[] = [];
    for (let i = 0; i < 10; i++) {
      const fd = openSync(path.join(tmp, 'a'), 'w');
      fstatSync(fd);
      closeSync(fd);
      renameSync(path.join(tmp, 'a'), path.join(tmp, 'b'));
      ctimes.push(lstatSync(path.join(tmp, 'b'), { bigint: true }).ctimeNs);
    }
    const steps = ctimes.slice(1).map((c, i) => c - ctimes[i]!);
    // Coarse: a loop this short repeats a tick's value. Fine: every step forward, some well under a tick (others may be long on a busy machine).
    return steps.every((d) => d > 0n) && steps.some((d) => d < 500_000n);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function unwatchAll(): void {
  for (const w of watchers.values()) w.close();
  watchers.clear();
}

serve({
  /** New expectations (replacing the old); already-correct files count at arm time. Quiet: no watches until armed otherwise. */
  async arm(m) {
    const items = m.items as Item[];
    byDir = new Map(items.map((i) => [i.dir, i]));
    seen = new Map();
    landed = new Map();
    quiet = m.quiet === true;
    // Checked once, in the kubelet root (<root>/pods/<uid>/volumes/<plugin>/<volume>), outside every pod's directory.
    const root = items[0] ? path.resolve(items[0].dir, '../../../..') : undefined;
    if (quiet && root && !checkedFine.has(root)) {
      if (!fineCtimes(root)) throw new Error(`the quiet probe measures by ctime, and renames under ${root} get coarse ones (no multigrain timestamps, Linux 6.13+): run with --no-quiet-probe`);
      checkedFine.add(root);
    }
    if (quiet) unwatchAll();
    else for (const i of items) ensureWatch(i.dir);
    const at = nowMs();
    await Promise.all(items.map((i) => check(i, at)));
    return { already: seen.size };
  },
  /** Resolves when every armed pod's file is as expected, or after timeoutMs. */
  async wait(m) {
    if (quiet) {
      const until = nowMs() + (m.timeoutMs as number);
      for (;;) {
        await Promise.all([...byDir.values()].map((i) => check(i, nowMs())));
        if (seen.size === byDir.size || nowMs() >= until) break;
        await new Promise((r) => setTimeout(r, SCAN_EVERY_MS));
      }
    } else if (seen.size < byDir.size) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, m.timeoutMs as number);
        waiter = () => { clearTimeout(t); r(); };
      });
      waiter = undefined;
    }
    const missing = [...byDir.values()].filter((i) => !seen.has(i.key)).map((i) => i.key);
    return { times: Object.fromEntries(seen), landed: Object.fromEntries(landed), missing };
  },
  /** inotify events on the agent's file names since the last reset. */
  count(m) {
    const n = events;
    if (m.reset) events = 0;
    return { events: n };
  },
  close() {
    unwatchAll();
    return {};
  },
});
