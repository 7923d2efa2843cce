// The Supervisor's guarantee that no child outlives the runner (localcluster/controlplane/process.ts,
// layers 1 and 2), and that a fleet of them costs the runner one 'exit' listener, not one each.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../../localcluster/controlplane/process.ts';

const PROCESS_TS = join(import.meta.dirname, '../../localcluster/controlplane/process.ts');
const dirs: string[] = [];

function workDir(): { workDir: string; logsDir: string } {
  const workDir = mkdtempSync(join(tmpdir(), 'ownerrefs-supervisor-'));
  dirs.push(workDir);
  const logsDir = join(workDir, 'logs');
  mkdirSync(logsDir);
  return { workDir, logsDir };
}

/** Running: present and not a zombie (a killed child whose parent is gone waits for a reaper). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('Supervisor', () => {
  it('adds one process exit listener for any number of supervisors, and removes it when the last one closes', async () => {
    const before = process.listenerCount('exit');
    const sups = Array.from({ length: 12 }, () => {
      const d = workDir();
      return new Supervisor(d.workDir, d.logsDir);
    });
    expect(process.listenerCount('exit')).toBe(before + 1);
    await Promise.all(sups.slice(1).map((s) => s.close()));
    expect(process.listenerCount('exit')).toBe(before + 1); // one still open
    await sups[0]!.close();
    expect(process.listenerCount('exit')).toBe(before);
  });

  it('stops a child with close()', async () => {
    const d = workDir();
    const sup = new Supervisor(d.workDir, d.logsDir);
    const c = sup.spawn({ name: 'sleeper', bin: '/bin/sleep', args: ['300'] });
    expect(alive(c.pid)).toBe(true);
    await sup.close();
    expect(c.exited).toBe(true);
    expect(alive(c.pid)).toBe(false);
  });

  it("kills every supervisor's children when the runner exits without closing them", () => {
    // Two supervisors in a child runner, a sleeper each; the pids files are emptied so the
    // watchdogs (layer 3) have nothing to kill: only the exit listener (layer 2) can.
    const dirsJson = JSON.stringify([workDir(), workDir()]);
    const script = `
      import { writeFileSync } from 'node:fs';
      import { join } from 'node:path';
      import { Supervisor } from ${JSON.stringify(PROCESS_TS)};
      const pids = [];
      for (const d of ${dirsJson}) {
        const sup = new Supervisor(d.workDir, d.logsDir);
        pids.push(sup.spawn({ name: 'sleeper', bin: '/bin/sleep', args: ['300'] }).pid);
        writeFileSync(join(d.workDir, 'pids'), '');
      }
      process.stdout.write(JSON.stringify(pids));
      process.exit(0);
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stderr).toBe(0);
    const pids = JSON.parse(r.stdout) as number[];
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(alive(pid), `sleeper ${pid} outlived its runner`).toBe(false);
  });
});
