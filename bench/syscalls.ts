// The cost of the writer's system calls: the agent's own FsVolumeWriter on N volumes of
// three files, with its calls counted and timed through its `ops` seam, issued inline
// (what it does on tmpfs) or through libuv's thread pool (what it does on a disk-backed
// emptyDir). How much of a write is Node's per-call overhead rather than the kernel's work.
//
//   change   a sync after the files changed (verify: false), then the stamp check the
//            reconciler makes for each rename its directory watch reports
//   verify   a sync that checks the disk first (start-up, resync, a directory event) and
//            finds the files current
// The thread pool runs 4 volumes in flight, as the default --concurrency does.
//
//   node bench/syscalls.ts [N=1000] [parent dir, default /dev/shm]

import * as fs from 'node:fs';
import path from 'node:path';
import { FILES, project } from '../projections/index.ts';
import { inlineOps, threadPoolOps, type FileOps, type FsOps } from '../agent/files/volume/fsops.ts';
import { FsVolumeWriter, type VolumeTarget } from '../agent/files/volume/writer.ts';

const n = Number(process.argv[2] ?? 1000);
const root = fs.mkdtempSync(path.join(process.argv[3] ?? '/dev/shm', 'ownerrefs-syscalls-'));
const target = (i: number): VolumeTarget => ({ root, components: ['pods', `uid-${i}`, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'], memory: true });
type Kind = 'change' | 'verify';

/** `ops` with every call, on the set and on each open file, counted. */
function counted(ops: FsOps, count: { calls: number }): FsOps {
  const wrap = <F extends (...a: never[]) => unknown>(f: F): F => ((...a: Parameters<F>) => (count.calls++, f(...a))) as F;
  const file = (fh: FileOps): FileOps => ({
    fd: fh.fd, stat: wrap(fh.stat), chmod: wrap(fh.chmod), writeAll: wrap(fh.writeAll), read: wrap(fh.read), close: wrap(fh.close),
  });
  return {
    open: async (p, flags, mode) => (count.calls++, file(await ops.open(p, flags, mode))),
    lstat: wrap(ops.lstat), unlink: wrap(ops.unlink), rename: wrap(ops.rename), mkdir: wrap(ops.mkdir), rmdir: wrap(ops.rmdir), readdir: wrap(ops.readdir),
  };
}

async function round(kind: Kind, mode: 'inline' | 'thread pool', owner: string): Promise<void> {
  const count = { calls: 0 };
  const ops = counted(mode === 'inline' ? inlineOps : threadPoolOps, count);
  const writer = new FsVolumeWriter({ ops: { memory: ops, disk: ops } });
  const files = project({ metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner, uid: `uid-${owner}` }] } });
  const one = async (i: number) => {
    await writer.sync(target(i), files, [], { verify: kind === 'verify' });
    if (kind === 'change') for (const f of files) await writer.stampOf(target(i), f.path);
  };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  if (mode === 'inline') for (let i = 0; i < n; i++) await one(i);
  else {
    let next = 0;
    await Promise.all(Array.from({ length: 4 }, async () => { while (next < n) await one(next++); }));
  }
  const c = process.cpuUsage(c0);
  console.log(`${kind.padEnd(7)} ${mode.padEnd(12)} ${(count.calls / n).toFixed(0).padStart(3)} calls per volume; ` +
    `wall ${((performance.now() - t0) * 1000 / n).toFixed(0).padStart(5)} µs, CPU user ${(c.user / n).toFixed(0)} + system ${(c.system / n).toFixed(0)} µs per volume`);
}

try {
  for (let i = 0; i < n; i++) fs.mkdirSync(path.join(root, ...target(i).components), { recursive: true });
  await new FsVolumeWriter().sync(target(0), project({ metadata: { ownerReferences: [] } })); // files exist from here on
  // Twice each, alternating: the first round warms up (page cache, dentries, the interpreter).
  let owner = 0;
  for (const kind of ['change', 'verify', 'change', 'verify'] as Kind[]) {
    for (const mode of ['thread pool', 'inline'] as const) {
      if (kind === 'change') owner++; // new bytes, so every file is written
      await round(kind, mode, `owner-${owner}`);
    }
  }
  if (!fs.existsSync(path.join(root, ...target(n - 1).components, FILES.ownerReferences))) throw new Error('the writer wrote nothing');
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
