// The file-system calls the writer makes, in two flavours behind one seam.
//
// threadPool: fs/promises. Each call is a round trip through libuv's thread pool,
//   about 20 µs of CPU on tmpfs, and a call stuck on a hung disk blocks only a pool
//   thread: the agent stays responsive. Used for disk-backed volumes.
// inline: the synchronous calls, on the event loop. On tmpfs they cannot block on a
//   device and cost a fifth of the CPU (docs/contributing/benchmarks.md: a 1,000-pod burst drains
//   at the watch's own pace instead of queueing). Used for memory-backed volumes only.

import fs from 'node:fs';
import fsp from 'node:fs/promises';

export interface FileOps {
  readonly fd: number;
  stat(): Promise<fs.Stats>;
  chmod(mode: number): Promise<void>;
  /** Writes all of buf at offset 0. */
  writeAll(buf: Buffer): Promise<void>;
  /** Reads up to buf.length bytes from offset 0; returns how many. */
  read(buf: Buffer): Promise<number>;
  close(): Promise<void>;
}

export interface FsOps {
  open(path: string, flags: number, mode?: number): Promise<FileOps>;
  lstat(path: string): Promise<fs.Stats>;
  unlink(path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  mkdir(path: string, mode: number): Promise<void>;
  rmdir(path: string): Promise<void>;
  /** Entries of a directory, with their types (CSI unpublish of an unknown pod only: writer.ts step 10a). */
  readdir(path: string): Promise<fs.Dirent[]>;
}

export const threadPoolOps: FsOps = {
  async open(path, flags, mode) {
    const fh = await fsp.open(path, flags, mode);
    return {
      fd: fh.fd,
      stat: () => fh.stat(),
      chmod: (m) => fh.chmod(m),
      async writeAll(buf) {
        for (let off = 0; off < buf.length;) off += (await fh.write(buf, off, buf.length - off, off)).bytesWritten;
      },
      read: async (buf) => (await fh.read(buf, 0, buf.length, 0)).bytesRead,
      close: () => fh.close(),
    };
  },
  lstat: (p) => fsp.lstat(p),
  unlink: (p) => fsp.unlink(p),
  rename: (a, b) => fsp.rename(a, b),
  mkdir: async (p, mode) => { await fsp.mkdir(p, mode); },
  rmdir: (p) => fsp.rmdir(p),
  readdir: (p) => fsp.readdir(p, { withFileTypes: true }),
};

// async functions: a throw from a sync call becomes a rejection, as with fs/promises.
export const inlineOps: FsOps = {
  async open(path, flags, mode) {
    const fd = fs.openSync(path, flags, mode);
    return {
      fd,
      stat: async () => fs.fstatSync(fd),
      chmod: async (m) => fs.fchmodSync(fd, m),
      async writeAll(buf) {
        for (let off = 0; off < buf.length;) off += fs.writeSync(fd, buf, off, buf.length - off, off);
      },
      read: async (buf) => fs.readSync(fd, buf, 0, buf.length, 0),
      close: async () => fs.closeSync(fd),
    };
  },
  lstat: async (p) => fs.lstatSync(p),
  unlink: async (p) => fs.unlinkSync(p),
  rename: async (a, b) => fs.renameSync(a, b),
  mkdir: async (p, mode) => { fs.mkdirSync(p, mode); },
  rmdir: async (p) => fs.rmdirSync(p),
  readdir: async (p) => fs.readdirSync(p, { withFileTypes: true }),
};
