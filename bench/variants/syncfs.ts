// What-if shim (bench/variants/hook.ts, "syncfs"): the part of node:fs/promises that
// agent/volume/writer.ts uses, issued synchronously on the main thread. The writer's code is
// unchanged: it still awaits each call (one microtask), but no call goes through libuv's
// thread pool, so a volume write costs its system calls and no thread hand-offs.
// The price is robustness: a call that blocks in the kernel (a hung NFS or FUSE mount,
// a stalled disk) blocks the whole event loop, the API watch and /healthz included.

import * as fs from 'node:fs';
import type { Mode, PathLike, Stats } from 'node:fs';

/** The FileHandle methods the writer calls. */
class SyncFileHandle {
  readonly fd: number;

  constructor(fd: number) {
    this.fd = fd;
  }

  async close(): Promise<void> {
    fs.closeSync(this.fd);
  }

  async stat(): Promise<Stats> {
    return fs.fstatSync(this.fd);
  }

  async read(buffer: Buffer, offset: number, length: number, position: number | null): Promise<{ bytesRead: number; buffer: Buffer }> {
    return { bytesRead: fs.readSync(this.fd, buffer, offset, length, position), buffer };
  }

  async write(buffer: Buffer, offset = 0, length = buffer.length - offset, position: number | null = null): Promise<{ bytesWritten: number; buffer: Buffer }> {
    let n = 0;
    while (n < length) n += fs.writeSync(this.fd, buffer, offset + n, length - n, position === null ? null : position + n);
    return { bytesWritten: n, buffer };
  }

  async chmod(mode: Mode): Promise<void> {
    fs.fchmodSync(this.fd, mode);
  }
}

export async function open(path: PathLike, flags: string | number = 'r', mode?: Mode): Promise<SyncFileHandle> {
  return new SyncFileHandle(fs.openSync(path, flags, mode));
}
export async function lstat(path: PathLike): Promise<Stats> {
  return fs.lstatSync(path);
}
export async function stat(path: PathLike): Promise<Stats> {
  return fs.statSync(path);
}
export async function unlink(path: PathLike): Promise<void> {
  fs.unlinkSync(path);
}
export async function rename(from: PathLike, to: PathLike): Promise<void> {
  fs.renameSync(from, to);
}
export async function rmdir(path: PathLike): Promise<void> {
  fs.rmdirSync(path);
}
export async function mkdir(path: PathLike, mode?: Mode): Promise<void> {
  fs.mkdirSync(path, mode);
}

export default { open, lstat, stat, unlink, rename, rmdir, mkdir };
