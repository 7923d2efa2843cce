// Self-heal: a pod that deletes or rewrites its files gets them back from the directory
// watch (README: "a changed or deleted file is verified and restored"), long before the
// periodic resync (60 s; agentKit runs none, so here only directory events can heal).
// The kubelet creates a pod's volume after the pod is bound, so the watch usually starts
// on an ancestor and moves down: that is the case that must work.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FILES } from '../../projections/index.ts';
import { agentKit } from '../support/agentkit.ts';
import { pod } from '../support/fixtures.ts';
import { makeVolume } from '../support/tmpdir.ts';
import { waitFor } from '../../localcluster/wait.ts';

const isCurrent = (env: string) => () => {
  try { return readFileSync(env, 'utf8').startsWith('OWNER_REFERENCES='); } catch { return false; }
};

/** Spoils the env file twice (delete, then overwrite); resolves when both were restored. */
async function spoilAndAwait(vol: string): Promise<void> {
  const env = path.join(vol, FILES.env);
  for (const spoil of [() => rmSync(env), () => writeFileSync(env, 'tampered')]) {
    spoil();
    // Directory events heal in milliseconds; 3 s is a generous bound (the resync would take 60 s).
    await waitFor(isCurrent(env), { timeoutMs: 3000, describe: 'restored from the directory watch' });
  }
}

const settle = () => new Promise((r) => setTimeout(r, 1500)); // past dirwatch's own 100 ms / 1 s rechecks

describe('self-heal from the directory watch', () => {
  it('a volume that existed before the pod was seen', async () => {
    const k = agentKit();
    const p = pod();
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(isCurrent(path.join(vol, FILES.env)));
    await settle();
    await spoilAndAwait(vol);
    expect(isCurrent(path.join(vol, FILES.env))()).toBe(true);
  });

  // Regression tests (found while writing these tests; fixed in dd87557, which watches an
  // existing volume with its own fs.watch): when a target's watch moved from an ancestor down to
  // the volume, chokidar's unwatch(ancestor) added a recursive ignore that swallowed every event
  // inside the volume - so self-heal only came with the 60 s resync, for every volume the kubelet
  // creates after the pod is bound, and one pod's volume appearing silenced all the others.
  it('a volume the kubelet creates after the pod is seen', async () => {
    const k = agentKit();
    const p = pod();
    k.reconciler.upsert(p);
    await settle();
    const vol = makeVolume(k.root, p.metadata!.uid!);
    await waitFor(isCurrent(path.join(vol, FILES.env)));
    await settle();
    await spoilAndAwait(vol);
  }, 15_000);

  it('a watched volume, after another pod\'s volume appears', async () => {
    const k = agentKit();
    const a = pod();
    const b = pod();
    const volA = makeVolume(k.root, a.metadata!.uid!);
    k.reconciler.replace([a, b]); // b's watch waits on an ancestor until its volume exists
    await waitFor(isCurrent(path.join(volA, FILES.env)));
    const volB = makeVolume(k.root, b.metadata!.uid!);
    await waitFor(isCurrent(path.join(volB, FILES.env)));
    await settle();
    await spoilAndAwait(volA);
  }, 15_000);
});
