// A CPU cgroup for the node side of the bench (every agent, the floor, the file probe), for
// `npm run bench -- --node-cpu-shares=N`. In a cluster the API server and etcd run on other
// machines; here they share two cores with the agent. Giving the node side a larger CPU
// weight than the control plane and the bench's own client (cpu.shares 1024 by default)
// tells how much of a tail is that sharing: the floor gets the same weight as the agent,
// so the ratio stays a like-for-like comparison. A what-if of the machine, not of the agent.
//
// cgroup v1 (cpu.shares, 2 to 262144) or v2 (cpu.weight, 1 to 10000, shares scaled by 100/1024).
// Needs root; a machine without either says so and the run stops before measuring.

import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const V1 = '/sys/fs/cgroup/cpu';
const V2 = '/sys/fs/cgroup';

export class CpuGroup {
  readonly dir: string;
  readonly #parent: string;
  readonly #pids = new Set<number>();

  private constructor(dir: string, parent: string) {
    this.dir = dir;
    this.#parent = parent;
  }

  /** Makes the group `name` with this weight in cpu.shares units (1024 is every other process's). */
  static create(name: string, shares: number): CpuGroup {
    if (!Number.isInteger(shares) || shares < 2 || shares > 262_144) throw new Error(`--node-cpu-shares: a whole number from 2 to 262144, not ${shares}`);
    if (existsSync(path.join(V1, 'cpu.shares'))) {
      const dir = path.join(V1, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'cpu.shares'), String(shares));
      return new CpuGroup(dir, V1);
    }
    const controllers = path.join(V2, 'cgroup.subtree_control');
    if (existsSync(controllers)) {
      if (!readFileSync(controllers, 'utf8').split(/\s+/).includes('cpu')) writeFileSync(controllers, '+cpu');
      const dir = path.join(V2, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'cpu.weight'), String(Math.min(10_000, Math.max(1, Math.round((shares * 100) / 1024)))));
      return new CpuGroup(dir, V2);
    }
    throw new Error('--node-cpu-shares: no cgroup cpu controller here (neither /sys/fs/cgroup/cpu nor a cgroup v2 root)');
  }

  /** Moves a process (all its threads) into the group. */
  add(pid: number): void {
    writeFileSync(path.join(this.dir, 'cgroup.procs'), String(pid));
    this.#pids.add(pid);
  }

  /** Moves every process still alive back to the root group, then removes the group. */
  remove(): void {
    for (const pid of this.#pids) {
      try {
        writeFileSync(path.join(this.#parent, 'cgroup.procs'), String(pid));
      } catch { /* exited */ }
    }
    this.#pids.clear();
    rmdirSync(this.dir);
  }
}
