// File probe (child process): records, per pod, the first moment its projected
// `ownerReferences` file holds the expected bytes. inotify (fs.watch on each volume
// directory) wakes it on the agent's rename; the time is taken when the event is
// delivered, before the read that confirms the bytes.
//
// It also records the file's ctime, which the agent's rename set: when the file landed,
// by the kernel's clock, however late this process was woken. The difference is the
// probe's own lag. Fine-grained only where the kernel stamps a queried inode with a
// fine-grained time (multigrain timestamps, Linux 6.13+; the agent lstat's each file it
// renames); on older kernels it is a clock tick (1 to 4 ms) coarse.

import { lstat, readFile } from 'node:fs/promises';
import { watch, type FSWatcher } from 'node:fs';
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

async function check(item: Item, at: number): Promise<void> {
  if (seen.has(item.key)) return;
  let text: string;
  try {
    text = await readFile(path.join(item.dir, FILE), 'utf8');
  } catch {
    return; // not there yet
  }
  if (text !== item.expected || seen.has(item.key)) return;
  // The bench renames each file once per round, so the ctime is that of the bytes just read.
  const st = await lstat(path.join(item.dir, FILE)).catch(() => null);
  if (seen.has(item.key)) return;
  seen.set(item.key, at);
  // Wall clock to monotonic: the offset between the two, taken now (sub-millisecond).
  if (st) landed.set(item.key, st.ctimeMs - (performance.timeOrigin + performance.now() - nowMs()));
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

serve({
  /** New expectations (replacing the old); already-correct files count at arm time. */
  async arm(m) {
    const items = m.items as Item[];
    byDir = new Map(items.map((i) => [i.dir, i]));
    seen = new Map();
    landed = new Map();
    for (const i of items) ensureWatch(i.dir);
    const at = nowMs();
    await Promise.all(items.map((i) => check(i, at)));
    return { already: seen.size };
  },
  /** Resolves when every armed pod's file is as expected, or after timeoutMs. */
  async wait(m) {
    if (seen.size < byDir.size) {
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
    for (const w of watchers.values()) w.close();
    watchers.clear();
    return {};
  },
});
