// Process accounting from /proc for a child we started: RSS, peak RSS and CPU time.
// CPU comes from two sources that cross-check each other: utime+stime in
// /proc/<pid>/stat (whole process, 10 ms ticks) and the sum of every thread's
// /proc/<pid>/task/<tid>/schedstat (nanoseconds; includes libuv's file-system threads,
// which do the agent's disk work). The same schedstat gives the time each thread was
// runnable but waiting for a CPU (its second field): how much of a latency is the
// machine's contention rather than the process's own work.

import { readdirSync, readFileSync } from 'node:fs';

const TICK_S = 0.01; // USER_HZ is 100 on Linux

export interface ProcSample {
  /** Resident set size, MiB. */
  rssMiB: number;
  /** Peak resident set size since start (VmHWM), MiB. */
  hwmMiB: number;
  /** utime + stime, seconds (10 ms resolution). */
  cpuTicksS: number;
  /** Sum of per-thread on-CPU time, seconds (ns resolution; live threads only). */
  cpuS: number;
  /** Sum of per-thread time runnable but not running (run-queue wait), seconds. */
  waitS: number;
  /** The main thread's (tid = pid) on-CPU and run-queue wait time, seconds: a Node process's JavaScript thread. */
  mainCpuS: number;
  mainWaitS: number;
  threads: number;
}

/** On-CPU and run-queue wait nanoseconds of one thread (schedstat's first two fields), or null if it exited. */
function schedstat(pid: number, tid: string): [number, number] | null {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ');
    return [Number(run), Number(wait)];
  } catch {
    return null; // thread exited
  }
}

function statusKiB(text: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

export function sample(pid: number): ProcSample {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name (which may contain spaces).
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15)
  let ns = 0;
  let waitNs = 0;
  let main: [number, number] = [0, 0];
  let threads = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const t = schedstat(pid, tid);
    if (!t) continue;
    ns += t[0];
    waitNs += t[1];
    if (tid === String(pid)) main = t;
    threads++;
  }
  return {
    rssMiB: statusKiB(status, 'VmRSS') / 1024,
    hwmMiB: statusKiB(status, 'VmHWM') / 1024,
    cpuTicksS: ticks * TICK_S,
    cpuS: ns / 1e9,
    waitS: waitNs / 1e9,
    mainCpuS: main[0] / 1e9,
    mainWaitS: main[1] / 1e9,
    threads,
  };
}

/** CPU used between two samples, seconds, from the precise source. */
export function cpuBetween(a: ProcSample, b: ProcSample): number {
  return b.cpuS - a.cpuS;
}

/** One process's share of the machine between two moments, seconds: on a CPU, and runnable but waiting for one; whole process and main thread. */
export interface ProcShare { cpuS: number; waitS: number; mainCpuS: number; mainWaitS: number }

/**
 * CPU and run-queue wait of each named process between two moments, seconds (whole process
 * and its main thread). A process that exited or was not running is left out.
 */
export class Contention {
  readonly #pids: Record<string, number>;
  readonly #at: Record<string, ProcSample> = {};

  constructor(pids: Record<string, number | undefined>) {
    this.#pids = Object.fromEntries(Object.entries(pids).filter((e): e is [string, number] => e[1] !== undefined));
    for (const [name, pid] of Object.entries(this.#pids)) {
      try {
        this.#at[name] = sample(pid);
      } catch { /* not running */ }
    }
  }

  /** Since construction: per process, CPU and wait seconds, and the main thread's. */
  since(): Record<string, ProcShare> {
    const out: Record<string, ProcShare> = {};
    for (const [name, a] of Object.entries(this.#at)) {
      let b: ProcSample;
      try {
        b = sample(this.#pids[name]!);
      } catch {
        continue; // exited meanwhile
      }
      const r = (x: number) => Math.round(x * 1000) / 1000;
      out[name] = { cpuS: r(b.cpuS - a.cpuS), waitS: r(b.waitS - a.waitS), mainCpuS: r(b.mainCpuS - a.mainCpuS), mainWaitS: r(b.mainWaitS - a.mainWaitS) };
    }
    return out;
  }
}
