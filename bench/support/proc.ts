// Process accounting from /proc for a child we started: RSS, peak RSS and CPU time.
// CPU comes from two sources that cross-check each other: utime+stime in
// /proc/<pid>/stat (whole process, 10 ms ticks) and the sum of every thread's
// /proc/<pid>/task/<tid>/schedstat (nanoseconds; includes libuv's file-system threads,
// which do the agent's disk work).

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
  threads: number;
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
  let threads = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      threads++;
    } catch { /* thread exited */ }
  }
  return {
    rssMiB: statusKiB(status, 'VmRSS') / 1024,
    hwmMiB: statusKiB(status, 'VmHWM') / 1024,
    cpuTicksS: ticks * TICK_S,
    cpuS: ns / 1e9,
    threads,
  };
}

/** CPU used between two samples, seconds, from the precise source. */
export function cpuBetween(a: ProcSample, b: ProcSample): number {
  return b.cpuS - a.cpuS;
}
