import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../../agent/node/nodeconfig.ts';
import { FILES } from '../../../projections/index.ts';
import { ProjectionError } from '../../../agent/common/errors.ts';
import { FsVolumeWriter, type VolumeWriter } from '../../../agent/files/volume/writer.ts';
import { agentKit } from '../../support/agentkit.ts';
import { FakeClock } from '../../support/clock.ts';
import { owner, pod } from '../../support/fixtures.ts';
import { makeVolume } from '../../support/tmpdir.ts';
import { waitFor } from '../../../localcluster/wait.ts';

const read = (vol: string, f: string = FILES.ownerReferences) => readFileSync(path.join(vol, f), 'utf8');
const named = (vol: string, name: string) => async () => existsSync(path.join(vol, FILES.ownerReferences)) && read(vol).includes(`"name":"${name}"`);

describe('Reconciler', () => {
  it('writes the files of an opted-in pod into its volume', async () => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'ds-a' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.replace([p]);
    await waitFor(named(vol, 'ds-a'));
    expect(readdirSync(vol).sort()).toEqual([FILES.dependents, FILES.ownerReferences, FILES.env].sort());
  });

  it('renders a large first state in slices, and a pod event that arrives meanwhile wins over the listed view', async () => {
    const k = agentKit();
    const listed = Array.from({ length: 250 }, () => pod({ owners: [owner({ name: 'listed' })] }));
    const vols = listed.map((p) => makeVolume(k.root, p.metadata!.uid!));
    const last = listed.at(-1)!;
    k.reconciler.replace(listed);
    // Newer than the list, and before the last slice of it is rendered.
    k.reconciler.upsert({ ...last, metadata: { ...last.metadata, ownerReferences: [owner({ name: 'newer' })] } });
    await k.reconciler.idle();
    expect(read(vols.at(-1)!)).toContain('"name":"newer"');
    for (const v of vols.slice(0, -1)) expect(read(v)).toContain('"name":"listed"');
  });

  it('ignores pods without the annotation', async () => {
    const k = agentKit();
    const p = pod({ annotation: undefined });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await k.reconciler.idle();
    expect(readdirSync(vol)).toEqual([]);
    expect(await k.metrics.registry.getSingleMetric('ownerrefs_pods_tracked')!.get()).toMatchObject({ values: [{ value: 0 }] });
  });

  it('follows owner changes: orphaning empties items, adoption restores them', async () => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'ds-a' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'ds-a'));
    k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [] } });
    await waitFor(() => read(vol) === '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}');
    expect(read(vol, FILES.dependents)).toBe('[]');
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'ds-a'));
  });

  it('does not write for churn that leaves the bytes unchanged', async () => {
    const k = agentKit();
    const p = pod();
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => existsSync(path.join(vol, FILES.ownerReferences)));
    await k.reconciler.idle();
    const writes = await k.writes();
    const inode = statSync(path.join(vol, FILES.ownerReferences)).ino;
    for (let i = 0; i < 50; i++) {
      k.reconciler.upsert({ ...p, metadata: { ...p.metadata, annotations: { ...p.metadata!.annotations, [`churn-${i}`]: 'x' } } });
    }
    await k.reconciler.idle();
    expect(await k.writes()).toBe(writes);
    expect(statSync(path.join(vol, FILES.ownerReferences)).ino).toBe(inode);
  });

  /** A pod owned by 'first' with its files and the node file written; `adopt()` moves it to 'second'. */
  async function withNodeFile() {
    const k = agentKit();
    k.reconciler.setNode({ name: 'worker-1', uid: 'n-1' });
    const p = pod({ owners: [owner({ name: 'first' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'first'));
    await waitFor(() => existsSync(path.join(vol, FILES.node)));
    await k.reconciler.idle();
    const adopt = () => k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'second', uid: 'u-2' })] } });
    return { k, vol, adopt };
  }

  it('an owner change rewrites the files it changes and leaves the node file alone', async () => {
    const { k, vol, adopt } = await withNodeFile();
    const node = statSync(path.join(vol, FILES.node)).ino;
    const writes = await k.writes();
    adopt();
    await waitFor(named(vol, 'second'));
    await k.reconciler.idle();
    expect(await k.writes() - writes).toBe(3); // env, dependents, ownerReferences
    expect(statSync(path.join(vol, FILES.node)).ino).toBe(node);
  });

  it('restores a file the pod overwrote even when an owner change leaves that file alone', async () => {
    const { vol, adopt } = await withNodeFile();
    const good = read(vol, FILES.node);
    writeFileSync(path.join(vol, FILES.node), 'lies');
    adopt();
    await waitFor(named(vol, 'second'));
    await waitFor(() => read(vol, FILES.node) === good, { describe: 'the node file restored' });
  });

  it('writes once the kubelet creates the volume directory', async () => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'late' })] });
    k.reconciler.upsert(p);
    await k.reconciler.idle();
    expect(existsSync(path.join(k.root, 'pods'))).toBe(false); // never created by the agent
    const vol = makeVolume(k.root, p.metadata!.uid!);
    await waitFor(named(vol, 'late'));
  });

  it.each([
    { what: 'deletes', spoil: (f: string) => rmSync(f) },
    { what: 'overwrites', spoil: (f: string) => writeFileSync(f, 'lies') },
    {
      // Same inode, same size, and the exact mtime put back (touch -r copies nanoseconds):
      // only the ctime, which no process can set, tells this version from the agent's.
      what: 'rewrites in place, same length, with its mtime put back',
      spoil: (f: string) => {
        const ref = `${path.dirname(f)}.mtime`;
        writeFileSync(ref, '');
        execFileSync('touch', ['-r', f, ref]);
        writeFileSync(f, readFileSync(f, 'utf8').replace('"heal"', '"lies"'));
        execFileSync('touch', ['-r', ref, f]);
      },
    },
  ])('restores a file the pod $what', async ({ spoil }) => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'heal' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'heal'));
    spoil(path.join(vol, FILES.ownerReferences));
    await waitFor(named(vol, 'heal'));
  });

  it('reports a misnamed volume once, as a Warning Event and one log line, and serves other pods', async () => {
    const k = agentKit();
    const bad = pod({ name: 'bad', annotation: 'nosuch' });
    const good = pod({ name: 'good', owners: [owner({ name: 'fine' })] });
    const vol = makeVolume(k.root, good.metadata!.uid!);
    k.reconciler.replace([bad, good]);
    for (let i = 0; i < 5; i++) k.reconciler.upsert({ ...bad, metadata: { ...bad.metadata, annotations: { ...bad.metadata!.annotations, rv: String(i) } } });
    await waitFor(named(vol, 'fine'));
    expect(k.events.sent).toEqual([{
      obj: expect.objectContaining({ kind: 'Pod', name: 'bad', namespace: 'default' }),
      reason: 'OwnerRefsProjectionFailed',
      message: 'VolumeNotDeclared: volume "nosuch": ownerrefs.dev/volume names it, but the pod has no volume of that name; add an emptyDir volume of that name to spec.volumes',
    }]);
    const warnings = k.lines.filter((l) => l.level === 40);
    expect(warnings).toEqual([expect.objectContaining({ pod: 'default/bad', volume: 'nosuch', reason: 'VolumeNotDeclared' })]);
  });

  it('retries a failing volume with backoff, reports it, and converges once fixed', async () => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'blocked' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    mkdirSync(path.join(vol, FILES.ownerReferences)); // a directory where our file goes
    k.reconciler.upsert(p);
    await waitFor(() => k.events.sent.some((e) => e.message.includes('NameTaken')));
    rmSync(path.join(vol, FILES.ownerReferences), { recursive: true });
    await waitFor(named(vol, 'blocked'));
  });

  it('refuses a pod whose files exceed the size limit and keeps the old files', async () => {
    const k = agentKit({ maxBytes: 2048 });
    const p = pod({ owners: [owner({ name: 'small' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'small'));
    k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: Array.from({ length: 100 }, (_, i) => owner({ name: `o${i}` })) } });
    await waitFor(() => k.events.sent.some((e) => e.message.startsWith('TooLarge')));
    await k.reconciler.idle();
    expect(read(vol)).toContain('"name":"small"');
  });

  it('holds writes while paused and catches up when resumed', async () => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'before' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'before'));
    k.reconciler.setSettings({ ...DEFAULT_SETTINGS, paused: true });
    k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'after' })] } });
    rmSync(path.join(vol, FILES.env)); // not even self-heal while paused
    await k.reconciler.idle();
    expect(read(vol)).toContain('"name":"before"');
    expect(existsSync(path.join(vol, FILES.env))).toBe(false);
    k.reconciler.setSettings(DEFAULT_SETTINGS);
    await waitFor(named(vol, 'after'));
    await waitFor(() => existsSync(path.join(vol, FILES.env)));
  });

  it('removes the env and dependents files when turned off and restores them when turned on', async () => {
    const k = agentKit();
    const p = pod();
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => readdirSync(vol).length === 3);
    k.reconciler.setSettings({ ...DEFAULT_SETTINGS, envFile: false, dependentsFile: false });
    await waitFor(() => readdirSync(vol).join() === FILES.ownerReferences);
    k.reconciler.setSettings(DEFAULT_SETTINGS);
    await waitFor(() => readdirSync(vol).length === 3);
  });

  it('leaves files alone when a pod is deleted or opts out', async () => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'gone' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(named(vol, 'gone'));
    k.reconciler.remove(p);
    rmSync(path.join(vol, FILES.env));
    k.reconciler.resyncAll();
    await k.reconciler.idle();
    expect(readdirSync(vol).sort()).toEqual([FILES.dependents, FILES.ownerReferences].sort());
  });

  it('untracks pods missing from a relist', async () => {
    const k = agentKit();
    const a = pod();
    const b = pod();
    k.reconciler.replace([a, b]);
    k.reconciler.replace([b]);
    expect(await k.metrics.registry.getSingleMetric('ownerrefs_pods_tracked')!.get()).toMatchObject({ values: [{ value: 1 }] });
  });
});

describe('Reconciler when the kubelet removes a volume', () => {
  it('logs it once at info, sends no Event, and serves the volume again when it comes back', async () => {
    const k = agentKit();
    const p = pod();
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => existsSync(path.join(vol, FILES.ownerReferences)));
    rmSync(path.dirname(path.dirname(vol)), { recursive: true }); // the pod's volumes directory, torn down
    for (let i = 0; i < 3; i++) {
      k.reconciler.resyncAll();
      await k.reconciler.idle();
    }
    const gone = k.lines.filter((l) => l.msg === 'volume or file gone while the pod is tracked (the kubelet tore the volume down, or the pod removed the file); writing again when it is back');
    expect(gone).toEqual([expect.objectContaining({ level: 30, volume: 'podinfo', podUID: p.metadata!.uid })]);
    expect(k.events.sent).toEqual([]);
    makeVolume(k.root, p.metadata!.uid!);
    await waitFor(() => existsSync(path.join(vol, FILES.ownerReferences)));
  });
});

describe('Reconciler retries of a volume that keeps failing', () => {
  /** A writer whose syncs fail as a read-only volume would, after `hold` (a write in flight), counting them. */
  function failingWriter(hold: () => Promise<void> = async () => {}) {
    const real = new FsVolumeWriter();
    let syncs = 0;
    const writer: VolumeWriter = {
      sync: async () => {
        syncs++;
        await hold();
        throw new ProjectionError('WriteFailed', 'EROFS: read-only file system');
      },
      clear: (t, n) => real.clear(t, n),
      stampOf: (t, n) => real.stampOf(t, n),
    };
    return { writer, syncs: () => syncs };
  }

  it('waits out its backoff through events that change nothing it writes (status updates), and retries when it is due', async () => {
    const clock = new FakeClock();
    const w = failingWriter();
    const k = agentKit({ writer: w.writer, clock });
    const p = pod({ owners: [owner({ name: 'a' })] });
    makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await k.reconciler.idle();
    expect(w.syncs()).toBe(1);
    for (let i = 0; i < 20; i++) {
      k.reconciler.upsert({ ...p, metadata: { ...p.metadata, annotations: { ...p.metadata!.annotations, status: String(i) } } });
      await k.reconciler.idle();
    }
    expect(w.syncs()).toBe(1);
    clock.advance(1_000); // the first retry is due within 0.5 s
    await waitFor(() => w.syncs() >= 2);
    await k.reconciler.idle();
    const before = w.syncs();
    k.reconciler.upsert({ ...p, metadata: { ...p.metadata, ownerReferences: [owner({ name: 'b' })] } }); // new owners: worth a try now
    await waitFor(() => w.syncs() > before);
  });

  /** A pod whose write is in flight (each held until `release`) and then fails; the clock is frozen, so no backoff elapses. */
  async function failingInFlight() {
    let held = () => {};
    const w = failingWriter(() => new Promise<void>((r) => { held = r; }));
    const clock = new FakeClock();
    const k = agentKit({ writer: w.writer, clock });
    const p = pod({ owners: [owner({ name: 'a' })] });
    makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert(p);
    await waitFor(() => w.syncs() === 1);
    return { k, p, w, clock, release: () => held() };
  }

  it('does not run a failing write again at once for a status update that arrives while it runs (the backoff stands)', async () => {
    const { k, p, w, release } = await failingInFlight();
    for (let i = 0; i < 5; i++) {
      k.reconciler.upsert({ ...p, metadata: { ...p.metadata, annotations: { ...p.metadata!.annotations, status: String(i) } } }); // during the write
      release();
      await new Promise((r) => setTimeout(r, 20));
    }
    await k.reconciler.idle();
    expect(w.syncs()).toBe(1);
  });

  it('neither reports nor retries a write that fails after its pod was deleted', async () => {
    const { k, p, w, clock, release } = await failingInFlight();
    k.reconciler.remove(p);
    release();
    await k.reconciler.idle();
    clock.advance(120_000);
    await k.reconciler.idle();
    expect(w.syncs()).toBe(1);
    expect(k.events.sent.filter((e) => e.obj.uid === p.metadata!.uid)).toEqual([]);
  });
});

// The kubelet makes a memory-backed emptyDir's directory, then mounts a tmpfs over it: what the
// agent writes in between is hidden, with no directory event. Mounting needs root, as the kubelet does.
const ROOT_USER = process.getuid?.() === 0;
if (!ROOT_USER) console.warn('NOT ROOT: the tmpfs-over-emptyDir tests of reconciler.test.ts are skipped (they mount a tmpfs)');
describe.runIf(ROOT_USER)('a tmpfs mounted over a memory-backed emptyDir after the first write', () => {
  it.each([
    { what: 'the pod\'s first Running view writes every file again into the mount', running: true, want: [FILES.dependents, FILES.ownerReferences, FILES.env].sort() },
    { what: 'until then, nothing new to write leaves the mount empty (no event says it came)', running: false, want: [] },
  ])('$what', async ({ running, want }) => {
    const k = agentKit();
    const p = pod({ owners: [owner({ name: 'ds-a' })] });
    const vol = makeVolume(k.root, p.metadata!.uid!);
    k.reconciler.upsert({ ...p, status: { phase: 'Pending' } });
    await waitFor(named(vol, 'ds-a'));
    await k.reconciler.idle();
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', vol]);
    try {
      expect(readdirSync(vol)).toEqual([]);
      k.reconciler.upsert({ ...p, status: { phase: running ? 'Running' : 'Pending' } });
      await k.reconciler.idle();
      expect(readdirSync(vol).sort()).toEqual(want);
    } finally {
      execFileSync('umount', [vol]);
    }
  });
});
