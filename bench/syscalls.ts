// The cost of the writer's system calls alone: the same sequence FsVolumeWriter runs to
// replace three files in one volume (open the directory chain through /proc/self/fd,
// remove stale temporaries, lstat, create, write, fchmod, close, rename), issued
// through fs/promises (as the agent does) or synchronously. Not the agent's code: a
// model of it, to show how much of a write is Node's per-call overhead.
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

function syncOne(i: number, data: Buffer): void {
  let d = fs.openSync(root, C.O_RDONLY | C.O_DIRECTORY);
  for (const c of comps(i)) {
    const next = fs.openSync(`/proc/self/fd/${d}/${c}`, DIR);
    fs.closeSync(d);
    d = next;
  }
  const at = (name: string) => `/proc/self/fd/${d}/${name}`;
  for (const name of NAMES) fs.rmSync(at(`.tmp.${name}`), { force: true });
  for (const name of NAMES) {
    fs.lstatSync(at(name), { throwIfNoEntry: false });
    const fd = fs.openSync(at(`.tmp.${name}`), CREATE, 0o600);
    fs.writeSync(fd, data);
    fs.fchmodSync(fd, 0o644);
    fs.closeSync(fd);
    fs.renameSync(at(`.tmp.${name}`), at(name));
  }
  fs.closeSync(d);
}

async function asyncOne(i: number, data: Buffer): Promise<void> {
  let d = await fsp.open(root, C.O_RDONLY | C.O_DIRECTORY);
  for (const c of comps(i)) {
    const next = await fsp.open(`/proc/self/fd/${d.fd}/${c}`, DIR);
    await d.close();
    d = next;
  }
  const at = (name: string) => `/proc/self/fd/${d.fd}/${name}`;
  for (const name of NAMES) await fsp.rm(at(`.tmp.${name}`), { force: true });
  for (const name of NAMES) {
    await fsp.lstat(at(name)).catch(() => undefined);
    const fh = await fsp.open(at(`.tmp.${name}`), CREATE, 0o600);
    await fh.write(data, 0, data.length, 0);
    await fh.chmod(0o644);
    await fh.close();
    await fsp.rename(at(`.tmp.${name}`), at(name));
  }
  await d.close();
}

try {
  for (let i = 0; i < n; i++) fs.mkdirSync(path.join(root, ...comps(i)), { recursive: true });
  for (const mode of ['fs/promises, 4 in flight', 'synchronous', 'fs/promises, 4 in flight', 'synchronous']) {
    const data = Buffer.from(`{"kind":"OwnerReference","apiVersion":"meta/v1","items":[],"x":"${Math.random()}"}`);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    if (mode === 'synchronous') for (let i = 0; i < n; i++) syncOne(i, data);
    else {
      let i = 0;
      await Promise.all(Array.from({ length: 4 }, async () => { while (i < n) await asyncOne(i++, data); }));
    }
    const c = process.cpuUsage(c0);
    console.log(`${mode.padEnd(26)} wall ${((performance.now() - t0) * 1000 / n).toFixed(0).padStart(5)} µs per volume; CPU user ${(c.user / n).toFixed(0)} + system ${(c.system / n).toFixed(0)} µs`);
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
