// Reconciler: the agent's policy. It turns pod events, directory events and node
// settings into volume syncs, and is where projection errors are handled: counted,
// logged once (rate-limited per pod) and reported as an Event on the pod. The pod
// table holds the state, VolumeSync does one sync, PublishedTargets the CSI volumes,
// SelfHeal the directory events and the resync.
//
// Cost model: a pod event costs a render and a comparison with what was last synced;
// disk is touched only when the bytes changed or a directory event / resync asks
// for verification. Nothing scans all pods on a single event.

import path from 'node:path';
import type { Logger } from 'pino';
import { admit, filesTurnedOff } from './admission.ts';
import { realClock, type Clock } from '../common/clock.ts';
import type { DirWatchEvents, DirWatcher } from './volume/dirwatch.ts';
import { ProjectionError } from '../common/errors.ts';
import { DiskClaims } from './diskclaims.ts';
import { DirLocks } from './volume/dirlocks.ts';
import { PublishedTargets } from './published.ts';
import { VolumeSync } from './volumesync.ts';
import type { EventSink, InvolvedObject } from '../kube/events.ts';
import type { ReflectorHandler } from '../kube/reflectorcontract.ts';
import { F } from '../monitoring/logfields.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import { DEFAULT_SETTINGS, type NodeSettings } from '../node/nodeconfig.ts';
import { WorkQueue } from '../common/queue.ts';
import { PodTable, dirOf, fingerprintFor, podKey, refusedIn, type Tracked } from './podtable.ts';
import type { ResourceList } from '../../projections/downwardapi.ts';
import type { NodeRef } from '../../projections/index.ts';
import type { OwnerMetadataCache } from '../owners/ownermeta.ts';
import { OwnerFollowing } from '../owners/following.ts';
import { FailureReporter } from './reporter.ts';
import { diskUID, optedIn, usesCsiDriver } from './volume/resolve.ts';
import { CONCURRENCY, FIRST_STATE_SLICE, MAX_BYTES } from '../common/defaults.ts';
import { SelfHeal } from './selfheal.ts';
import { Slices } from './slices.ts';

/** Deleted pods remembered, so that a late view of one is not tracked again (a few KiB). */
const DELETED_REMEMBERED = 4_096;
import type { VolumeTarget, VolumeWriter } from './volume/writer.ts';
import { ANNOTATION_MIRROR } from '../../projections/names.ts';
import type { PodView } from '../node/podview.ts';

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
  /** Owners' metadata, for nodes that follow owners (absent: controllerChain is never written). */
  owners?: Pick<OwnerMetadataCache, 'lookup'>;
}

export class Reconciler implements ReflectorHandler<PodView> {
  readonly #o: ReconcilerOptions & { clock: Clock; maxBytes: number };
  readonly #pods: PodTable;
  readonly #queue: WorkQueue;
  /** UIDs of pods deleted lately, oldest first (at most DELETED_REMEMBERED). */
  readonly #deleted = new Set<string>();
  readonly #dirs: DirWatcher;
  readonly #heal: SelfHeal;
  readonly #reporter: FailureReporter;
  readonly #locks = new DirLocks();
  readonly #sync: VolumeSync;
  readonly #published: PublishedTargets;
  readonly #claims = new DiskClaims();
  #settings: NodeSettings = DEFAULT_SETTINGS;
  #allocatable: ResourceList = {};
  readonly #following: OwnerFollowing;
  /** The pods of the last first state that are not rendered yet. */
  readonly #first = new Slices<PodView>({
    size: FIRST_STATE_SLICE,
    apply: (pod) => this.#upsertOne(pod),
    failed: (pod, err) => this.#o.log.error({ [F.pod]: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`, [F.podUID]: pod.metadata?.uid, [F.err]: err },
      'rendering a pod of the first state failed; the pod waits for its next event'),
  });

  constructor(opts: ReconcilerOptions) {
    if (!path.isAbsolute(opts.kubeletRoot)) throw new Error(`kubelet root must be absolute, got ${JSON.stringify(opts.kubeletRoot)}`);
    this.#o = { clock: realClock, maxBytes: MAX_BYTES, ...opts };
    const clock = this.#o.clock;
    this.#following = new OwnerFollowing(opts.owners);
    this.#queue = new WorkQueue({ concurrency: opts.concurrency ?? CONCURRENCY, process: (uid) => this.#process(uid), clock });
    this.#heal = new SelfHeal({ table: () => this.#pods, queue: this.#queue, locks: this.#locks, writer: opts.writer, clock });
    this.#dirs = opts.dirs(this.#heal);
    this.#pods = new PodTable({ dirs: this.#dirs, metrics: opts.metrics });
    this.#reporter = new FailureReporter({ log: opts.log, events: opts.events, metrics: opts.metrics, clock });
    this.#sync = new VolumeSync({ table: this.#pods, writer: opts.writer, locks: this.#locks, metrics: opts.metrics, clock });
    this.#published = new PublishedTargets({
      table: this.#pods, sync: this.#sync, writer: opts.writer, locks: this.#locks, clock,
      removals: () => filesTurnedOff(this.#settings), report: (t, e) => this.#report(t, e),
    });
  }

  get settings(): NodeSettings {
    return this.#settings;
  }

  /** Resolves when the last first state is rendered and no sync is queued or running. */
  async idle(): Promise<void> {
    await this.#first.done();
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
    // Not remembered as deleted: a pod a CSI publish read (GET) after this state's snapshot
    // is missing from it too, and its ADDED event follows on the watch.
    for (const uid of this.#claims.pods()) if (!seen.has(uid)) this.#gone(uid, false);
    // Rendered in slices (slices.ts); a pod's own event meanwhile supersedes its listed view.
    this.#first.start(new Map(items.filter((p) => p.metadata?.uid).map((p) => [p.metadata!.uid!, p])));
  }

  upsert(pod: PodView): void {
    const uid = pod.metadata?.uid;
    if (!uid || this.#deleted.has(uid)) return; // a late view of a deleted pod (a CSI GET that lost the race to the DELETED event)
    this.#first.supersede(uid);
    const affected = this.#claims.see(uid, pod.metadata?.annotations?.[ANNOTATION_MIRROR]);
    // The others first: a pod that claimed this one's directory before it arrived must let
    // go of it (index, volumes) before this pod is tracked there.
    this.#revisit(affected);
    this.#upsertOne(pod);
  }

  remove(pod: PodView): void {
    if (!pod.metadata?.uid) return;
    this.#first.supersede(pod.metadata.uid);
    this.#gone(pod.metadata.uid);
  }

  #gone(uid: string, deleted = true): void {
    // UIDs are never reused: a deleted pod does not come back, so later views of it are stale.
    if (deleted) this.#deleted.add(uid);
    if (this.#deleted.size > DELETED_REMEMBERED) this.#deleted.delete(this.#deleted.values().next().value!);
    const affected = this.#claims.forget(uid);
    this.#untrack(uid);
    this.#reporter.forget(uid); // only now: forgetting on opt-out would let toggling reset the log limit
    this.#revisit(affected);
  }

  /** Pods whose mirror claim may be judged differently now that another pod came or went. */
  #revisit(uids: string[]): void {
    for (const other of uids) {
      const t = this.#pods.get(other);
      if (t) this.#again(other, t);
    }
  }

  /** Renders a tracked pod again from its newest view: a listed one still waiting in a slice, or the one it has. */
  #again(uid: string, t: Tracked): void {
    this.#upsertOne(this.#first.take(uid) ?? t.view);
  }

  #upsertOne(pod: PodView): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const claimed = diskUID(pod).uid ?? uid;
    const refusal = this.#claims.refusal(uid, claimed);
    const disk = refusal ? uid : claimed;
    if (!optedIn(pod) && !this.#published.has(disk) && !usesCsiDriver(pod, this.#o.csiDriver)) {
      this.#untrack(uid); // opted out (if it was in): files stay, updates stop
      return;
    }
    const ref: InvolvedObject = { kind: 'Pod', name: pod.metadata?.name ?? '', namespace: pod.metadata?.namespace, uid };
    const t = this.#pods.get(uid) ?? this.#pods.track(uid, ref, disk);
    this.#pods.setDisk(uid, t, disk);
    const a = admit(pod, {
      kubeletRoot: this.#o.kubeletRoot, settings: this.#settings, maxBytes: this.#o.maxBytes, csiDriver: this.#o.csiDriver,
      mirrorRefused: refusal ? { claimed, why: refusal } : undefined, allocatable: this.#allocatable,
      context: this.#following.contextFor(uid, pod.metadata?.namespace ?? '', pod.metadata?.ownerReferences, this.#settings),
    });
    this.#reportResolution(t, a.errors);
    const started = pod.status?.phase === 'Running' && t.view.status?.phase !== 'Running';
    this.#pods.setView(t, pod, a.tooLarge);
    const added = this.#pods.setVolumes(uid, t, a.volumes, refusal ? [] : this.#published.volumes(disk));
    this.#published.arrived(disk);
    if (a.tooLarge) return;
    const changed = this.#pods.setFiles(t, a.files, a.owners, this.#o.clock.now(), a.volumeFiles);
    // A memory-backed emptyDir is a tmpfs the kubelet mounts over the directory it made first:
    // files written in between are hidden under the mount, and no directory event says so.
    // Containers start only once the volumes are mounted, so the first Running view checks them
    // (news that cuts no failure's backoff short: a pending retry checks them too).
    const mounted = started ? t.volumes.filter((v) => v.target.memory) : [];
    for (const v of mounted) this.#pods.verify(t, v.name);
    if (mounted.length > 0) this.#queue.addIfIdle(uid);
    // A pod waiting out a failure's backoff, or being synced now, is not run again by events
    // that change nothing it would write (status updates): only new files or a new volume are news.
    if (!this.#pods.behind(t)) return;
    if (changed || added) this.#queue.add(uid);
    else this.#queue.addIfIdle(uid);
  }

  /** Node labels changed. Re-render everything when the set of files changes. */
  setSettings(next: NodeSettings): void {
    const prev = this.#settings;
    this.#settings = next;
    if (prev.envFile !== next.envFile || prev.dependentsFile !== next.dependentsFile || prev.nodeFile !== next.nodeFile || prev.followOwners !== next.followOwners) {
      this.#revisitAll();
    }
    if (prev.paused && !next.paused) this.resyncAll();
    else for (const [uid, t] of this.#pods.entries()) if (this.#pods.behind(t)) this.#queue.add(uid);
  }

  /** This node's name and UID (nodeOwnerReferences); every pod is rendered again when they change. */
  setNode(node: NodeRef | undefined): void {
    if (this.#following.setNode(node)) this.#revisitAll();
  }

  /** True while some tracked pod's chain passes through this owner. */
  ownerInUse(ownerUid: string): boolean {
    return this.#following.hasDependents(ownerUid);
  }

  /** An owner's metadata changed (or was first read): render the pods whose chain passes through it. */
  ownerChanged(ownerUid: string): void {
    for (const uid of this.#following.dependentsOf(ownerUid)) {
      const t = this.#pods.get(uid);
      if (t) this.#again(uid, t);
    }
  }

  #revisitAll(): void {
    for (const [uid, t] of [...this.#pods.entries()]) this.#again(uid, t);
  }

  /**
   * The node's allocatable changed: downwardAPI items read it for limits a container does
   * not set, so pods with such volumes are rendered again (the others cost nothing).
   */
  setAllocatable(next: ResourceList): void {
    if (JSON.stringify(next) === JSON.stringify(this.#allocatable)) return;
    this.#allocatable = next;
    for (const [uid, t] of [...this.#pods.entries()]) if (t.volumeFiles.size > 0) this.#again(uid, t);
  }

  /** Verify every tracked volume on disk (periodic backstop for missed inotify events). */
  resyncAll(): void {
    this.#heal.resyncAll();
  }

  async close(): Promise<void> {
    this.#first.cancel();
    this.#published.close();
    await this.#queue.drain();
    await this.#dirs.close();
  }

  // CSI (agent/files/csi/ through PodTargets): see published.ts.

  waitForPod(diskUid: string, ms: number): Promise<boolean> {
    return this.#published.waitForPod(diskUid, ms);
  }

  publish(diskUid: string, volume: string, target: VolumeTarget): Promise<boolean> {
    return this.#published.publish(diskUid, volume, target);
  }

  adopt(diskUid: string, volume: string, target: VolumeTarget): void {
    this.#published.adopt(diskUid, volume, target);
  }

  unpublish(diskUid: string, volume: string, target: VolumeTarget): Promise<string[]> {
    return this.#published.unpublish(diskUid, volume, target);
  }

  #untrack(uid: string): void {
    this.#following.forget(uid);
    if (this.#pods.untrack(uid)) this.#queue.forget(uid);
  }

  async #process(uid: string): Promise<void> {
    const t = this.#pods.get(uid);
    if (!t) {
      this.#queue.forget(uid); // gone: no backoff to keep
      return;
    }
    if (this.#settings.paused) {
      this.#o.log.debug({ [F.pod]: podKey(t), [F.podUID]: uid }, 'paused: not writing');
      return;
    }
    const remove = filesTurnedOff(this.#settings);
    let failed = false;
    for (const v of t.volumes) {
      if (this.#pods.upToDate(t, v.name) || refusedIn(t, v.name)) continue; // a refused volume was reported at upsert
      if (this.#pods.atDir(dirOf(v.target))?.uid !== uid) continue; // dropped (say, unpublished) since the loop began
      // Check the disk first only when asked (start, resync, dir events, after a failure);
      // otherwise the fingerprint changed, so the bytes on disk are known to differ.
      const verify = this.#pods.takeVerify(t, v.name);
      const hadFiles = t.stamps.has(v.name); // gone after a failure: a second failure is not news
      try {
        const r = await this.#sync.run(uid, t, v, { verify, remove });
        if (this.#pods.get(uid) !== t) return; // deleted meanwhile
        if (r.written.length > 0) {
          if (r.fingerprint === fingerprintFor(t, v.name)) this.#o.metrics.latency.observe((this.#o.clock.now() - t.receivedAt) / 1000);
          this.#o.log.debug({ [F.pod]: podKey(t), [F.volume]: v.name, [F.written]: r.written, [F.removed]: r.removed }, 'projected');
        }
      } catch (err) {
        if (this.#pods.get(uid) !== t) return; // deleted meanwhile: nothing to report or retry
        const e = err as ProjectionError; // VolumeSync throws ProjectionErrors only
        // Not there yet (or torn down): the directory watch brings us back. Not misuse, so no
        // Event; but a volume that held our files vanishing under a tracked pod is worth a line.
        if (e.reason === 'VolumeNotFound') {
          if (hadFiles) this.#o.log.info({ [F.pod]: podKey(t), [F.podUID]: uid, [F.volume]: v.name }, 'volume or file gone while the pod is tracked (the kubelet tore the volume down, or the pod removed the file); writing again when it is back');
          continue;
        }
        failed = true;
        this.#report(t, e);
      }
    }
    if (failed) this.#queue.retry(uid);
    else this.#queue.forget(uid);
  }

  #reportResolution(t: Tracked, errors: ProjectionError[]): void {
    if (!this.#pods.reported(t, errors.map((e) => e.reason + e.message).join('\n'))) return;
    for (const e of errors) this.#report(t, e.withContext({ pod: podKey(t) }));
  }

  #report(t: Tracked, e: ProjectionError): void {
    this.#reporter.report(t.pod, e);
  }
}
