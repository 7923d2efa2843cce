import { mkdirSync, rmSync, symlinkSync, watch as fsWatch, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { VolumeDirWatcher } from '../../../../agent/files/volume/dirwatch.ts';
import { tmpDir } from '../../../support/tmpdir.ts';
import { waitFor } from '../../../../localcluster/wait.ts';

const open: VolumeDirWatcher[] = [];
afterEach(async () => {
  for (const w of open.splice(0)) await w.close();
});

function watcher(root: string, ignoreName?: (n: string) => boolean) {
  const seen = { appeared: [] as string[], changed: [] as string[] };
  const w = new VolumeDirWatcher(root, {
    appeared: (d) => seen.appeared.push(d),
    changed: (d, n) => seen.changed.push(`${path.relative(root, d)}/${n}`),
  }, (err) => { throw err; }, ignoreName);
  open.push(w);
  return { w, seen };
}

describe('VolumeDirWatcher', () => {
  it('reports a deep target that appears later, once the kubelet creates it', async () => {
    const root = tmpDir();
    const { w, seen } = watcher(root);
    const target = path.join(root, 'pods', 'u1', 'volumes', 'kubernetes.io~empty-dir', 'podinfo');
    w.watch(target);
    mkdirSync(path.join(root, 'pods', 'u1'), { recursive: true });
    mkdirSync(target, { recursive: true });
    await waitFor(() => seen.appeared.includes(target));
  });

  it('reports entries changing in an existing target, except ignored names', async () => {
    const root = tmpDir();
    const target = path.join(root, 'vol');
    mkdirSync(target);
    const { w, seen } = watcher(root, (n) => n.startsWith('.tmp'));
    w.watch(target);
    await waitFor(() => seen.appeared.includes(target));
    writeFileSync(path.join(target, '.tmp-x'), 'x');
    writeFileSync(path.join(target, 'ownerReferences'), 'x');
    await waitFor(() => seen.changed.includes('vol/ownerReferences'));
    rmSync(path.join(target, 'ownerReferences'));
    await waitFor(() => seen.changed.filter((c) => c === 'vol/ownerReferences').length >= 2);
    expect(seen.changed.some((c) => c.includes('.tmp'))).toBe(false);
  });

  it('waits again when the target is torn down, and reports it when it comes back', async () => {
    const root = tmpDir();
    const target = path.join(root, 'pods', 'u', 'vol');
    mkdirSync(target, { recursive: true });
    const { w, seen } = watcher(root);
    w.watch(target);
    await waitFor(() => seen.appeared.length === 1);
    rmSync(path.join(root, 'pods', 'u'), { recursive: true });
    await new Promise((r) => setTimeout(r, 200));
    mkdirSync(target, { recursive: true });
    await waitFor(() => seen.appeared.length >= 2);
  });

  it('never treats a symlink at the target as the target', async () => {
    const root = tmpDir();
    const elsewhere = path.join(root, 'elsewhere');
    mkdirSync(elsewhere);
    const target = path.join(root, 'vol');
    symlinkSync(elsewhere, target);
    const { w, seen } = watcher(root);
    w.watch(target);
    writeFileSync(path.join(elsewhere, 'ownerReferences'), 'x');
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toEqual({ appeared: [], changed: [] });
  });

  it('stops reporting an unwatched target', async () => {
    const root = tmpDir();
    const target = path.join(root, 'vol');
    mkdirSync(target);
    const { w, seen } = watcher(root);
    w.watch(target);
    await waitFor(() => seen.appeared.length === 1);
    w.unwatch(target);
    writeFileSync(path.join(target, 'ownerReferences'), 'x');
    await new Promise((r) => setTimeout(r, 300));
    expect(seen.changed).toEqual([]);
  });

  it('retries a target whose watch could not be set up (the node out of inotify watches), said once, counted meanwhile', async () => {
    const root = tmpDir();
    const target = path.join(root, 'vol');
    mkdirSync(target);
    let refusals = 1;
    const errors: unknown[] = [];
    const changed: string[] = [];
    const watchDir = ((...args: Parameters<typeof fsWatch>) => {
      if (refusals-- > 0) throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' });
      return fsWatch(...args);
    }) as typeof fsWatch;
    const w = new VolumeDirWatcher(root, { appeared: () => {}, changed: (_d, n) => changed.push(n) }, (err) => errors.push(err), () => false, watchDir);
    open.push(w);
    w.watch(target);
    await waitFor(() => w.unwatched === 1);
    expect(errors).toHaveLength(1);
    await waitFor(() => w.unwatched === 0, { timeoutMs: 15_000 }); // retried after PENDING_RECHECK_MS
    writeFileSync(path.join(target, 'x'), '');
    await waitFor(() => changed.includes('x'));
    expect(errors).toHaveLength(1);
  });

  it('checks again when the target goes while a check of it is in flight (a torn-down volume is never left for dead)', async () => {
    const root = tmpDir();
    const target = path.join(root, 'vol');
    mkdirSync(target);
    let deliver: ((ev: string, name: string) => void) | undefined;
    // The watch's events are delivered by hand, so that two land while one check is in flight.
    const watchDir = ((p: string, o: unknown, f: (ev: string, name: string) => void) => {
      deliver = f;
      return fsWatch(p, o as never, () => {});
    }) as typeof fsWatch;
    let appeared = 0;
    const w = new VolumeDirWatcher(root, { appeared: () => { appeared++; }, changed: () => {} }, (err) => { throw err; }, () => false, watchDir);
    open.push(w);
    w.watch(target);
    await waitFor(() => appeared === 1);
    deliver!('rename', 'vol'); // a check starts: the directory is still there
    rmSync(target, { recursive: true }); // torn down before that check answers
    deliver!('rename', 'vol'); // its event arrives while the first check is in flight
    await new Promise((r) => setTimeout(r, 200));
    mkdirSync(target);
    await waitFor(() => appeared === 2, { timeoutMs: 15_000 });
  });

  it('retries a watch that failed otherwise (EACCES) too: said once, not counted as the node out of watches', async () => {
    const root = tmpDir();
    const target = path.join(root, 'vol');
    mkdirSync(target);
    const errors: unknown[] = [];
    let tries = 0;
    const watchDir = (() => {
      tries++;
      throw Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
    }) as unknown as typeof fsWatch;
    const w = new VolumeDirWatcher(root, { appeared: () => {}, changed: () => {} }, (err) => errors.push(err), () => false, watchDir);
    open.push(w);
    w.watch(target);
    await waitFor(() => tries >= 2, { timeoutMs: 15_000 });
    expect(errors).toHaveLength(1);
    expect(w.unwatched).toBe(0);
  });

  it('sets the watch up when the target was gone at fs.watch and is back by the time it looks again', async () => {
    const root = tmpDir();
    const target = path.join(root, 'vol');
    mkdirSync(target);
    let refusals = 1;
    const watchDir = ((...args: Parameters<typeof fsWatch>) => {
      if (refusals-- > 0) throw Object.assign(new Error('ENOENT: no such file or directory'), { code: 'ENOENT' });
      return fsWatch(...args);
    }) as typeof fsWatch;
    const changed: string[] = [];
    const w = new VolumeDirWatcher(root, { appeared: () => {}, changed: (_d, n) => changed.push(n) }, (err) => { throw err; }, () => false, watchDir);
    open.push(w);
    w.watch(target);
    await waitFor(async () => {
      writeFileSync(path.join(target, 'x'), '');
      await new Promise((r) => setTimeout(r, 50));
      return changed.includes('x');
    });
  });
});
