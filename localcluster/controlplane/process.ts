// Lifetime management for control-plane child processes.
//
// Guarantee wanted: no etcd/apiserver/... survives the test runner, however the
// runner ends. Three layers, because Node cannot set PR_SET_PDEATHSIG:
//  1. stop()/teardown: SIGTERM, then SIGKILL after a grace period, awaiting exit.
//  2. process.on('exit'): synchronous SIGKILL to every live child on a normal or
//     process.exit() shutdown (no awaiting is possible there).
//  3. A watchdog (one bash process per Supervisor) whose stdin is a pipe held only
//     by this Node process. When Node dies for any reason, including SIGKILL, the
//     kernel closes the pipe, `read` sees EOF, and the watchdog kills every pid
//     listed in <workDir>/pids (checking /proc/<pid>/exe, so a recycled pid is
//     never hit). SIGKILL, not SIGTERM: nobody is left to want a graceful
//     shutdown, and TERMing etcd and the apiserver together makes each wait
//     on the other until a KILL anyway. It ignores INT/TERM/HUP so a Ctrl-C
//     aimed at the whole process group cannot stop it before it has cleaned up.
// The pids file also lets a later run reap leftovers (reapStale) should even the
// watchdog have been killed.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';

const WATCHDOG = `
trap '' INT TERM HUP
while read -r _; do :; done
[ -f "$PIDS" ] || exit 0
while read -r pid exe name; do
  [ -n "$pid" ] || continue
  if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then kill -KILL "$pid" 2>/dev/null; fi
done < "$PIDS"
exit 0
`;

export interface SpawnSpec {
  name: string;
  bin: string;
  args: string[];
}

export interface Component {
  readonly name: string;
  readonly pid: number;
  readonly exited: boolean;
  // Resolves once the process has exited (immediately if it already has).
  exit(): Promise<void>;
}

const TERM_GRACE_MS = 5_000;

interface Live {
  proc: ChildProcess;
  bin: string;
  name: string;
  done: Promise<void>;
  exited: boolean;
}

/**
 * Every Supervisor not yet closed, behind one process 'exit' listener: a fleet has one
 * Supervisor per hollow node, and a listener each tripped Node's leak warning at eleven.
 */
const supervisors = new Set<Supervisor>();
const killAllOnExit = (): void => {
  for (const s of supervisors) s.killAllNow();
};

export class Supervisor {
  readonly logsDir: string;
  private readonly pidsPath: string;
  private readonly live = new Set<Live>();
  private readonly watchdog: ChildProcess;

  constructor(workDir: string, logsDir: string) {
    this.logsDir = logsDir;
    this.pidsPath = join(workDir, 'pids');
    writeFileSync(join(workDir, 'owner'), `${process.pid}\n`);
    writeFileSync(this.pidsPath, '');
    this.watchdog = spawn('bash', ['-c', WATCHDOG], {
      stdio: ['pipe', 'ignore', 'ignore'],
      env: { ...process.env, PIDS: this.pidsPath },
    });
    // The watchdog must not keep the runner alive; it only needs the pipe open.
    this.watchdog.unref();
    (this.watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    this.watchdog.stdin?.on('error', () => {});
    if (supervisors.size === 0) process.on('exit', killAllOnExit);
    supervisors.add(this);
  }

  /** Layer 2: SIGKILL to every live child, synchronously (process 'exit' cannot await). */
  killAllNow(): void {
    for (const l of this.live) if (!l.exited) l.proc.kill('SIGKILL');
  }

  spawn(spec: SpawnSpec): Component {
    // /proc/<pid>/exe shows the resolved path; record that for the watchdog.
    const bin = realpathSync(spec.bin);
    const fd = openSync(join(this.logsDir, `${spec.name}.log`), 'a');
    let proc: ChildProcess;
    try {
      // The child writes straight into the log file, so logs keep flowing even
      // while (or after) this process is busy or gone.
      proc = spawn(bin, spec.args, { stdio: ['ignore', fd, fd] });
    } finally {
      closeSync(fd);
    }
    const l: Live = { proc, bin, name: spec.name, exited: false, done: Promise.resolve() };
    l.done = new Promise<void>((resolve) => {
      const finish = (): void => {
        l.exited = true;
        this.live.delete(l);
        this.writePids();
        resolve();
      };
      proc.once('exit', finish);
      proc.once('error', finish);
    });
    if (proc.pid === undefined) throw new Error(`failed to spawn ${spec.bin}`);
    this.live.add(l);
    this.writePids();
    return {
      name: spec.name,
      pid: proc.pid,
      get exited() {
        return l.exited;
      },
      exit: () => l.done,
    };
  }

  // SIGTERM, SIGKILL after the grace period; resolves when the process is gone.
  async terminate(c: Component, graceMs = TERM_GRACE_MS): Promise<void> {
    const l = this.find(c);
    if (!l) return;
    l.proc.kill('SIGTERM');
    const timer = setTimeout(() => l.proc.kill('SIGKILL'), graceMs);
    await l.done;
    clearTimeout(timer);
  }

  async kill(c: Component): Promise<void> {
    const l = this.find(c);
    if (!l) return;
    l.proc.kill('SIGKILL');
    await l.done;
  }

  // Terminates everything still running and retires the watchdog.
  async close(): Promise<void> {
    await Promise.all([...this.live].map((l) => this.terminate(this.asComponent(l))));
    supervisors.delete(this);
    if (supervisors.size === 0) process.off('exit', killAllOnExit);
    // Nothing left to reap; without the file a kept workDir is not mistaken
    // for a crashed run's leftovers.
    await rm(this.pidsPath, { force: true });
    const wd = this.watchdog;
    if (wd.exitCode === null && wd.signalCode === null) {
      const gone = new Promise<void>((resolve) => wd.once('exit', () => resolve()));
      // Hold the event loop until it has gone, or a bare script would exit early.
      wd.ref();
      wd.stdin?.end();
      await gone;
    }
  }

  private find(c: Component): Live | undefined {
    for (const l of this.live) if (l.proc.pid === c.pid) return l;
    return undefined;
  }

  private asComponent(l: Live): Component {
    return { name: l.name, pid: l.proc.pid ?? -1, exited: l.exited, exit: () => l.done };
  }

  private writePids(): void {
    const lines = [...this.live].map((l) => `${l.proc.pid} ${l.bin} ${l.name}\n`);
    writeFileSync(this.pidsPath, lines.join(''));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True while the process that made workDir (this one included) is alive: not a leftover. */
export function ownerAlive(workDir: string): boolean {
  const ownerPath = join(workDir, 'owner');
  const owner = existsSync(ownerPath) ? Number(readFileSync(ownerPath, 'utf8').trim()) : NaN;
  return Number.isInteger(owner) && alive(owner);
}

// Kills processes recorded in <workDir>/pids by a runner that is no longer
// alive, then deletes that workDir (unless told not to: a real node unmounts first).
// Used at setup for the previous run's dirs. True when the workDir was stale.
export async function reapStale(workDir: string, opts: { remove?: boolean } = {}): Promise<boolean> {
  const ownerPath = join(workDir, 'owner');
  const pidsPath = join(workDir, 'pids');
  if (!existsSync(pidsPath)) return false;
  const owner = existsSync(ownerPath) ? Number(readFileSync(ownerPath, 'utf8').trim()) : NaN;
  if (Number.isInteger(owner) && owner !== process.pid && alive(owner)) return false;
  for (const line of readFileSync(pidsPath, 'utf8').split('\n')) {
    const [pidText, exe] = line.split(' ');
    const pid = Number(pidText);
    if (!Number.isInteger(pid) || pid <= 0 || !exe) continue;
    let actual = '';
    try {
      actual = readlinkSync(`/proc/${pid}/exe`);
    } catch {
      continue;
    }
    if (actual === exe) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
  if (owner !== process.pid && opts.remove !== false) await rm(workDir, { recursive: true, force: true });
  return true;
}
