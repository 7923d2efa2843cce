// Reconciler: the agent's policy. It turns pod events, directory events and node
// settings into writer calls, and is where projection errors are handled: counted,
// logged once (rate-limited per pod) and reported as an Event on the pod.
//
// Cost model: a pod event costs a render and a comparison with what was last synced;
// disk is touched only when the bytes changed or a directory event / resync asks
// for verification. Nothing scans all pods on a single event.

import path from 'node:path';
import type { Logger } from 'pino';
import { ALL_FILE_NAMES, FILES, ownersOf, project, type ProjectedFile } from '../../projections/index.ts';
import { realClock, type Clock } from '../common/clock.ts';
import type { DirWatchEvents, DirWatcher } from '../volume/dirwatch.ts';
import { ProjectionError } from '../common/errors.ts';
import { DiskClaims } from '../volume/diskclaims.ts';
import { DirLocks, ExtraTargets } from './extratargets.ts';
import type { EventSink, InvolvedObject } from '../kube/events.ts';
import type { ReflectorHandler } from '../kube/reflector.ts';
import { F } from '../monitoring/logfields.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import { DEFAULT_SETTINGS, type NodeSettings } from '../kube/nodeconfig.ts';
import { WorkQueue } from './queue.ts';
import { PodTable, dirOf, podKey, type PodView, type Tracked } from './podtable.ts';
import { FailureReporter } from './reporter.ts';
import { ANNOTATION_MIRROR, ANNOTATION_VOLUME, diskUID, optedIn, resolveVolumes, usesCsiDriver } from '../volume/resolve.ts';
import { describe } from '../common/validation.ts';
import { CONCURRENCY, MAX_BYTES } from '../common/defaults.ts';
import type { VolumeTarget, VolumeWriter } from '../volume/writer.ts';

export type { PodView } from './podtable.ts';

export interface ReconcilerOptions {
  /** Absolute (config.ts resolves it): directory events and the pod table compare paths below it. */
  kubeletRoot: string;
  writer: VolumeWriter;
  events: EventSink;
  log: Logger;
  metrics: AgentMetrics;
  /** Built by the reconciler with its own callbacks (see dirwatch.ts for the default). */
  dirs: (on: DirWatchEvents) => DirWatcher;
  clock?: Clock;
  /** Refuse (TooLarge) when a pod's files add up to more than this. */
  maxBytes?: number;
  /** Volumes written in parallel. */
  concurrency?: number;
  /** CSI driver name: pods with an inline volume of this driver are tracked without the annotation. */
  csiDriver?: string;
}

export class Reconciler implements ReflectorHandler<PodView>, DirWatchEvents {
  readonly #o: ReconcilerOptions & { clock: Clock; maxBytes: number };
  readonly #pods: PodTable;
  readonly #queue: WorkQueue;
  readonly #dirs: DirWatcher;
  readonly #reporter: FailureReporter;
  readonly #extra: ExtraTargets;
  readonly #locks = new DirLocks();
  readonly #claims = new DiskClaims();
  #settings: NodeSettings = DEFAULT_SETTINGS;

  constructor(opts: ReconcilerOptions) {
    if (!path.isAbsolute(opts.kubeletRoot)) throw new Error(`kubelet root must be absolute, got ${JSON.stringify(opts.kubeletRoot)}`);
    this.#o = { clock: realClock, maxBytes: MAX_BYTES, ...opts };
    this.#queue = new WorkQueue({ concurrency: opts.concurrency ?? CONCURRENCY, process: (uid) => this.#process(uid), clock: this.#o.clock });
    this.#dirs = opts.dirs(this);
    this.#pods = new PodTable({ dirs: this.#dirs, metrics: opts.metrics });
    this.#reporter = new FailureReporter({ log: opts.log, events: opts.events, metrics: opts.metrics, clock: this.#o.clock });
    this.#extra = new ExtraTargets(this.#o.clock);
  }

  get settings(): NodeSettings {
    return this.#settings;
  }

  /** Resolves when no sync is queued or running. */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  replace(items: PodView[]): void {
    const seen = new Set<string>();
    // Every pod's claim first: a mirror value naming a pod later in the list is refused
    // before anything is written for it.
    for (const pod of items) {
      const uid = pod.metadata?.uid;
      if (uid) {
        seen.add(uid);
        this.#claims.see(uid, pod.metadata?.annotations?.[ANNOTATION_MIRROR]);
      }
    }
    for (const uid of this.#claims.pods()) if (!seen.has(uid)) this.#gone(uid);
    for (const pod of items) this.#upsertOne(pod);
  }

  upsert(pod: PodView): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const affected = this.#claims.see(uid, pod.metadata?.annotations?.[ANNOTATION_MIRROR]);
    this.#upsertOne(pod);
    this.#revisit(affected);
  }

  remove(pod: PodView): void {
    if (pod.metadata?.uid) this.#gone(pod.metadata.uid);
  }

  #gone(uid: string): void {
    const affected = this.#claims.forget(uid);
    this.#untrack(uid);
    this.#reporter.forget(uid); // only now: forgetting on opt-out would let toggling reset the log limit
    this.#revisit(affected);
  }

  /** Pods whose mirror claim may be judged differently now that another pod came or went. */
  #revisit(uids: string[]): void {
    for (const other of uids) {
      const t = this.#pods.get(other);
      if (t) this.#upsertOne(t.view);
    }
  }

  #upsertOne(pod: PodView): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const claimed = diskUID(pod).uid ?? uid;
    const refusal = this.#claims.refusal(uid, claimed);
    const disk = refusal ? uid : claimed;
    if (!optedIn(pod) && !this.#extra.has(disk) && !usesCsiDriver(pod, this.#o.csiDriver)) {
      this.#untrack(uid); // opted out (if it was in): files stay, updates stop
      return;
    }
    const ref: InvolvedObject = { kind: 'Pod', name: pod.metadata?.name ?? '', namespace: pod.metadata?.namespace, uid };
    const t = this.#pods.get(uid) ?? this.#pods.track(uid, ref, disk);
    t.view = slim(pod);
    this.#pods.setDisk(uid, t, disk);
    const { volumes, errors } = refusal
      ? { volumes: [], errors: [new ProjectionError('InvalidMirrorUID',
        `${ANNOTATION_MIRROR} ${describe(claimed)} ${refusal}; only the kubelet sets it, on mirror pods of static pods: remove it`)] }
      : resolveVolumes(pod, this.#o.kubeletRoot);
    const files = project(pod, this.#settings);
    const size = files.reduce((n, f) => n + f.bytes.length, 0);
    if (size > this.#o.maxBytes) {
      errors.push(new ProjectionError('TooLarge',
        `the pod's ownerReferences render to ${size} bytes, over the agent's limit of ${this.#o.maxBytes}; files are left as they were`));
    }
    this.#reportResolution(t, errors);
    t.annotated = volumes;
    this.#pods.setVolumes(uid, t, refusal ? [] : [...volumes, ...this.#extra.volumes(disk)]);
    t.refused = size > this.#o.maxBytes ? errors.at(-1) : undefined;
    this.#extra.arrived(disk);
    if (size > this.#o.maxBytes) return;
    const fingerprint = fingerprintOf(files);
    if (fingerprint !== t.fingerprint) {
      t.owners = ownersOf(pod);
      t.files = files;
      t.fingerprint = fingerprint;
      t.receivedAt = this.#o.clock.now();
    }
    if (t.volumes.some((v) => t.synced.get(v.name) !== t.fingerprint)) this.#queue.add(uid);
  }

  /** Node labels changed. Re-render everything when the set of files changes. */
  setSettings(next: NodeSettings): void {
    const prev = this.#settings;
    this.#settings = next;
    if (prev.envFile !== next.envFile || prev.dependentsFile !== next.dependentsFile) {
      for (const [, t] of this.#pods.entries()) {
        t.files = project({ metadata: { ownerReferences: t.owners } }, next);
        t.fingerprint = fingerprintOf(t.files);
        t.receivedAt = this.#o.clock.now();
      }
    }
    if (prev.paused && !next.paused) this.resyncAll();
    else for (const [uid, t] of this.#pods.entries()) if (t.volumes.some((v) => t.synced.get(v.name) !== t.fingerprint)) this.#queue.add(uid);
  }

  /** Verify every tracked volume on disk (periodic backstop for missed inotify events). */
  resyncAll(): void {
    for (const [uid, t] of this.#pods.entries()) {
      for (const v of t.volumes) t.verify.add(v.name);
      this.#queue.add(uid);
    }
  }

  appeared(dir: string): void {
    // Also fired when a watch is set up on an existing directory: skip if our files are intact.
    this.#verifyUnlessOurs(dir, FILES.ownerReferences);
  }

  changed(dir: string, name: string): void {
    if (ALL_FILE_NAMES.includes(name)) this.#verifyUnlessOurs(dir, name);
  }

  /**
   * Every rename the agent makes comes back as a directory event. Comparing the file's
   * stamp (one lstat) with the one its own write left avoids re-reading the volume after
   * each write; anything else (deleted, replaced, rewritten in place) is verified.
   */
  #verifyUnlessOurs(dir: string, name: string): void {
    const at = this.#pods.atDir(dir);
    const v = at?.t.volumes.find((x) => x.name === at.volume);
    if (!at || !v || !at.t.files.some((f) => f.path === name)) return; // not a file we keep there
    const { t } = at;
    // Under the directory's lock: an event for a rename still in flight is judged after
    // that sync has recorded its stamps.
    void this.#locks.run(dir, async () => {
      const ours = t.stamps.get(at.volume)?.[name];
      if (!ours || (await this.#o.writer.stampOf(v.target, name)) !== ours) this.#verify(dir);
    });
  }

  async close(): Promise<void> {
    this.#extra.close();
    await this.#queue.drain();
    await this.#dirs.close();
  }

  // CSI (agent/csi/): targets the kubelet publishes, keyed by on-disk pod UID.

  /** Resolves true once a pod with this on-disk UID is tracked (at once if it is), false after `ms`. */
  waitForPod(diskUid: string, ms: number): Promise<boolean> {
    return this.#pods.onDisk(diskUid) ? Promise.resolve(true) : this.#extra.wait(diskUid, ms);
  }

  /**
   * Writes the pod's files into `target`, creating its last directory, and keeps them
   * current from then on. Resolves once they are on disk; false if no such pod is tracked.
   * Writes even while the node is paused: a new volume has no files to leave as they are.
   */
  async publish(diskUid: string, volume: string, target: VolumeTarget): Promise<boolean> {
    const found = this.#pods.onDisk(diskUid);
    if (!found) return false;
    const { uid, t } = found;
    if (t.refused) throw t.refused.withContext({ pod: podKey(t), volume });
    const { files, fingerprint } = t;
    let stamps: Record<string, string>;
    try {
      const r = await this.#locks.run(dirOf(target), () => this.#o.writer.sync(target, files, this.#removals(), { createTarget: true }));
      this.#o.metrics.fileWrites.inc(r.written.length);
      this.#o.metrics.fileUnchanged.inc(r.unchanged.length);
      stamps = r.stamps;
    } catch (err) {
      const e = err instanceof ProjectionError ? err : new ProjectionError('WriteFailed', String(err), {}, err);
      this.#report(t, e.withContext({ pod: podKey(t), volume }));
      throw e;
    }
    this.adopt(diskUid, volume, target);
    const now = this.#pods.get(uid);
    if (now) {
      now.synced.set(volume, fingerprint);
      now.stamps.set(volume, stamps);
      if (now.fingerprint !== fingerprint) this.#queue.add(uid); // the pod changed during the write
    }
    return true;
  }

  /** Keep `target` current without writing now (a target found published after a restart). */
  adopt(diskUid: string, volume: string, target: VolumeTarget): void {
    this.#extra.set(diskUid, volume, target);
    this.#refreshExtra(diskUid);
  }

  /** Stops updating `target`, then removes the files the agent wrote there and the directory. */
  async unpublish(diskUid: string, volume: string, target: VolumeTarget): Promise<string[]> {
    this.#extra.delete(diskUid, volume);
    this.#refreshExtra(diskUid);
    return (await this.#locks.run(dirOf(target), () => this.#o.writer.clear(target, ALL_FILE_NAMES))).removed;
  }

  #refreshExtra(diskUid: string): void {
    const found = this.#pods.onDisk(diskUid);
    if (found) this.#pods.setVolumes(found.uid, found.t, [...found.t.annotated, ...this.#extra.volumes(diskUid)]);
  }

  #removals(): string[] {
    return [
      ...(this.#settings.envFile ? [] : [FILES.env]),
      ...(this.#settings.dependentsFile ? [] : [FILES.dependents]),
    ];
  }

  #verify(dir: string): void {
    const at = this.#pods.atDir(dir);
    if (!at) return;
    at.t.verify.add(at.volume);
    this.#queue.add(at.uid);
  }

  #untrack(uid: string): void {
    if (this.#pods.untrack(uid)) this.#queue.forget(uid);
  }

  async #process(uid: string): Promise<void> {
    const t = this.#pods.get(uid);
    if (!t) return;
    if (this.#settings.paused) {
      this.#o.log.debug({ [F.pod]: podKey(t), [F.podUID]: uid }, 'paused: not writing');
      return;
    }
    const remove = this.#removals();
    let failed = false;
    for (const v of t.volumes) {
      const { fingerprint, files } = t;
      if (t.synced.get(v.name) === fingerprint && !t.verify.has(v.name)) continue;
      const dir = dirOf(v.target);
      if (this.#pods.atDir(dir)?.uid !== uid) continue; // dropped (say, unpublished) since the loop began
      // Check the disk first only when asked (start, resync, dir events, after a failure);
      // otherwise the fingerprint changed, so the bytes on disk are known to differ.
      const verify = t.verify.delete(v.name);
      try {
        const r = await this.#locks.run(dir, () => this.#o.writer.sync(v.target, files, remove, { verify }));
        if (this.#pods.get(uid) !== t) return; // deleted meanwhile
        t.synced.set(v.name, fingerprint);
        t.stamps.set(v.name, r.stamps);
        this.#o.metrics.fileWrites.inc(r.written.length);
        this.#o.metrics.fileUnchanged.inc(r.unchanged.length);
        this.#o.metrics.lastSync.set(this.#o.clock.now() / 1000);
        if (r.written.length > 0) {
          if (fingerprint === t.fingerprint) this.#o.metrics.latency.observe((this.#o.clock.now() - t.receivedAt) / 1000);
          this.#o.log.debug({ [F.pod]: podKey(t), [F.volume]: v.name, [F.written]: r.written, [F.removed]: r.removed }, 'projected');
        }
      } catch (err) {
        const e = err instanceof ProjectionError
          ? err.withContext({ pod: podKey(t), volume: v.name })
          : new ProjectionError('WriteFailed', String(err), { pod: podKey(t), volume: v.name }, err);
        t.synced.delete(v.name);
        t.stamps.delete(v.name);
        t.verify.add(v.name); // whatever is on disk now is unknown
        // Not there yet (or torn down): the directory watch brings us back. Not misuse.
        if (e.reason === 'VolumeNotFound') continue;
        failed = true;
        this.#report(t, e);
      }
    }
    if (failed) this.#queue.retry(uid);
    else this.#queue.forget(uid);
  }

  #reportResolution(t: Tracked, errors: ProjectionError[]): void {
    const key = errors.map((e) => e.reason + e.message).join('\n');
    if (key === t.reported) return;
    t.reported = key;
    for (const e of errors) this.#report(t, e.withContext({ pod: podKey(t) }));
  }

  #report(t: Tracked, e: ProjectionError): void {
    this.#reporter.report(t.pod, e);
  }
}

function fingerprintOf(files: readonly ProjectedFile[]): string {
  return files.map((f) => `${f.path}\0${f.mode}\0${f.bytes.toString('latin1')}`).join('\0\0');
}

/** The parts of a pod upsert reads; the watch object itself (status and all) is not kept. */
function slim(pod: PodView): PodView {
  const a = pod.metadata?.annotations ?? {};
  const keep = [ANNOTATION_VOLUME, ANNOTATION_MIRROR].filter((k) => a[k] !== undefined);
  return {
    metadata: {
      name: pod.metadata?.name, namespace: pod.metadata?.namespace, uid: pod.metadata?.uid,
      annotations: Object.fromEntries(keep.map((k) => [k, a[k]!])),
      ownerReferences: pod.metadata?.ownerReferences,
    },
    spec: { volumes: pod.spec?.volumes },
  };
}
