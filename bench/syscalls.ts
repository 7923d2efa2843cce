// The cost of the writer's system calls alone: the sequences FsVolumeWriter (agent/volume/writer.ts)
// runs on one volume of three files, issued through fs/promises (as the agent does, four
// volumes in flight as with the default --concurrency) or synchronously. Not the agent's
// code: a model of it, to show how much of a write is Node's per-call overhead (a hand-off
// to libuv's thread pool and back per call) rather than the kernel's work.
//
//   change   a sync after a fingerprint change (verify: false): open the directory chain
//            (6 opens, 6 closes), then per file create the temporary O_EXCL, write, fchmod,
//            fstat (the stamp), close, rename; then the directory watcher's stamp check
//            of each rename (lstat by path). 33 calls.
//   verify   a sync that checks the disk first (start-up, resync, a directory event) and
//            finds the files current: the directory chain, an unlink of each temporary
//            (ENOENT), per file lstat, open, fstat, read, close. 30 calls.
//
//   node bench/syscalls.ts [N=1000] [parent dir, default /dev/shm]

import * as fs from 'node:fs';
import { constants as C } from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

const n = Number(process.argv[2] ?? 1000);
const root = fs.mkdtempSync(path.join(process.argv[3] ?? '/dev/shm', 'ownerrefs-syscalls-'));
const comps = (i: number) => ['pods', `uid-${i}`, 'volumes', 'kubernetes.io~empty-dir', 'podinfo'];
const NAMES = ['ownerReferences.env', 'dependentOwnerReferences', 'ownerReferences'];
const DIR = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW;
const CREATE = C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW;
const READ = C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK;
type Kind = 'change' | 'verify';

function syncOne(kind: Kind, i: number, data: Buffer): void {
  let d = fs.openSync(root, C.O_RDONLY | C.O_DIRECTORY);
  for (const c of comps(i)) {
    const next = fs.openSync(`/proc/self/fd/${d}/${c}`, DIR);
    fs.closeSync(d);
    d = next;
  }
  const at = (name: string) => `/proc/self/fd/${d}/${name}`;
  if (kind === 'verify') {
    for (const name of NAMES) {
      try {
        fs.unlinkSync(at(`.tmp.${name}`));
      } catch { /* ENOENT */ }
    }
    const buf = Buffer.alloc(data.length + 1);
    for (const name of NAMES) {
      fs.lstatSync(at(name));
      const fd = fs.openSync(at(name), READ);
      fs.fstatSync(fd);
      fs.readSync(fd, buf, 0, buf.length, 0);
      fs.closeSync(fd);
    }
  } else {
    for (const name of NAMES) {
      const fd = fs.openSync(at(`.tmp.${name}`), CREATE, 0o600);
      fs.writeSync(fd, data, 0, data.length, 0);
      fs.fchmodSync(fd, 0o644);
      fs.fstatSync(fd);
      fs.closeSync(fd);
      fs.renameSync(at(`.tmp.${name}`), at(name));
    }
  }
  fs.closeSync(d);
  if (kind === 'change') for (const name of NAMES) fs.lstatSync(path.join(root, ...comps(i), name));
}

async function asyncOne(kind: Kind, i: number, data: Buffer): Promise<void> {
  let d = await fsp.open(root, C.O_RDONLY | C.O_DIRECTORY);
  for (const c of comps(i)) {
    const next = await fsp.open(`/proc/self/fd/${d.fd}/${c}`, DIR);
    await d.close();
    d = next;
  }
  const at = (name: string) => `/proc/self/fd/${d.fd}/${name}`;
  if (kind === 'verify') {
    for (const name of NAMES) await fsp.unlink(at(`.tmp.${name}`)).catch(() => undefined);
    const buf = Buffer.alloc(data.length + 1);
    for (const name of NAMES) {
      await fsp.lstat(at(name));
      const fh = await fsp.open(at(name), READ);
      await fh.stat();
      await fh.read(buf, 0, buf.length, 0);
      await fh.close();
    }
  } else {
    for (const name of NAMES) {
      const fh = await fsp.open(at(`.tmp.${name}`), CREATE, 0o600);
      await fh.write(data, 0, data.length, 0);
      await fh.chmod(0o644);
      await fh.stat();
      await fh.close();
      await fsp.rename(at(`.tmp.${name}`), at(name));
    }
  }
  await d.close();
  if (kind === 'change') for (const name of NAMES) await fsp.lstat(path.join(root, ...comps(i), name));
}

try {
  for (let i = 0; i < n; i++) fs.mkdirSync(path.join(root, ...comps(i)), { recursive: true });
  // Twice each, alternating: the first round warms up (JIT, page cache, dentries).
  for (const kind of ['change', 'verify', 'change', 'verify'] as Kind[]) {
    for (const mode of ['fs/promises, 4 in flight', 'synchronous']) {
      const data = Buffer.from(`{"kind":"OwnerReference","apiVersion":"meta/v1","items":[],"x":"${Math.random()}"}`);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      if (mode === 'synchronous') for (let i = 0; i < n; i++) syncOne(kind, i, data);
      else {
        let i = 0;
        await Promise.all(Array.from({ length: 4 }, async () => { while (i < n) await asyncOne(kind, i++, data); }));
      }
      const c = process.cpuUsage(c0);
      console.log(`${kind.padEnd(7)} ${mode.padEnd(26)} wall ${((performance.now() - t0) * 1000 / n).toFixed(0).padStart(5)} µs per volume; CPU user ${(c.user / n).toFixed(0)} + system ${(c.system / n).toFixed(0)} µs`);
    }
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
