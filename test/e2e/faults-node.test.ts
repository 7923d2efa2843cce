// Fault injection on the node side: the agent killed mid-burst, a volume torn down
// while being written, and volumes that refuse writes. A reader loop runs throughout.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { TEMP_PREFIX } from '../../agent/files/volume/writer.ts';
import { startBurst, type Burst } from '../support/burst.ts';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';
import { startReader } from '../support/reader.ts';

/** Every path under dir whose name starts with the writer's temporary prefix. */
function temporaries(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.name.startsWith(TEMP_PREFIX)) found.push(path.join(entry.parentPath, entry.name));
  }
  return found;
}

describe('node faults', () => {
  const e = useE2E('nodefaults');
  const converge = (b: Burst, i: number, pods: V1Pod[] = b.pods) => waitFor(() => b.behind(i).filter((p) => pods.includes(p)).length === 0,
    { timeoutMs: 60_000, describe: `files name owner ${i}` });

  it('survives SIGKILL during a burst of a thousand writes: files correct, no temporaries left', async () => {
    const b = await startBurst(e, { pods: 40, owners: 10, prefix: 'kill' });
    await converge(b, 0);
    const reader = await startReader(b.allowed());
    const writes = () => e.agent.metric('ownerrefs_file_writes_total');
    const start = await writes();
    const burst = (async () => { for (let i = 1; i < 10; i++) await b.setOwner(i); })(); // 9 x 40 pods x 3 files
    await waitFor(async () => (await writes()) - start >= 300, { describe: 'a few hundred writes done' });
    expect(await e.agent.stop('SIGKILL')).toBeNull();
    await burst;
    await e.restartAgent();
    await converge(b, 9);
    const stats = await reader.stop();
    expect(stats, stats.samples.join('\n')).toMatchObject({ missing: 0, torn: 0 });
    expect(temporaries(e.kubeletRoot)).toEqual([]);
    for (const p of b.pods) expect(e.file(p, 'dependentOwnerReferences')).toContain(b.owners[9]!.metadata!.uid);
  });

  it('does not crash, recreate or hold the directory when the kubelet removes a volume mid-write', async () => {
    const b = await startBurst(e, { pods: 10, owners: 8, prefix: 'rm' });
    await converge(b, 0);
    const [victim, ...others] = b.pods;
    const victimDir = e.kubelet.volumeDir(victim!.metadata!.uid!, 'podinfo');
    const allowed = b.allowed();
    delete allowed[path.join(victimDir, 'ownerReferences')];
    const reader = await startReader(allowed);
    const burst = (async () => { for (let i = 1; i < 8; i++) await b.setOwner(i); })();
    await e.kubelet.removeVolumeDir(victim!.metadata!.uid!, 'podinfo');
    await burst;
    await converge(b, 7, others);
    const stats = await reader.stop();
    expect(stats, stats.samples.join('\n')).toMatchObject({ missing: 0, torn: 0 });
    expect(e.agent.child.exitCode).toBeNull();
    expect(existsSync(victimDir)).toBe(false);
    const fds = readdirSync(`/proc/${e.agent.child.pid}/fd`).map((fd) => {
      try { return readlinkSync(`/proc/${e.agent.child.pid}/fd/${fd}`); } catch { return ''; }
    });
    expect(fds.filter((l) => l.startsWith(e.kubeletRoot) || l.includes('(deleted)'))).toEqual([]);
  });

  it.each([
    { how: 'full', mount: 'size=16k', spoil: (dir: string) => writeFileSync(path.join(dir, 'filler'), Buffer.alloc(16 * 1024)), errno: 'ENOSPC',
      heal: (dir: string) => rmSync(path.join(dir, 'filler')) },
    { how: 'read-only', mount: 'ro,size=64k', spoil: () => {}, errno: 'EROFS',
      heal: (dir: string) => execFileSync('mount', ['-o', 'remount,rw', dir]) },
  ])('reports a $how volume with a Warning Event, retries, and serves every other pod', async ({ how, mount, spoil, errno, heal }) => {
    const b = await startBurst(e, { pods: 4, owners: 3, prefix: how.replace(/\W/g, '') });
    await converge(b, 0);
    const [bad, ...others] = b.pods;
    const dir = e.kubelet.volumeDir(bad!.metadata!.uid!, 'podinfo');
    const dev = statSync(dir).dev;
    execFileSync('mount', ['-t', 'tmpfs', '-o', mount, 'tmpfs', dir]); // as a sizeLimit'd memory emptyDir is
    try {
      spoil(dir);
      await b.setOwner(1);
      await converge(b, 1, others);
      const event = await waitFor(async () => (await e.core.listNamespacedEvent({ namespace: e.ns, fieldSelector: `involvedObject.name=${bad!.metadata!.name}` }))
        .items.find((x) => x.reason === 'OwnerRefsProjectionFailed'), { describe: `Warning Event for the ${how} volume` });
      expect(event.type).toBe('Warning');
      expect(event.message).toMatch(new RegExp(`WriteFailed: volume "podinfo": .*${errno}`));
      heal(dir);
      await converge(b, 1); // retried with backoff until it works
      expect(statSync(dir).dev).not.toBe(dev); // written into the mount, not beneath it
    } finally {
      execFileSync('umount', ['-l', dir]);
    }
  });
});
