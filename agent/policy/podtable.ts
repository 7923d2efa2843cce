// PodTable: the reconciler's bookkeeping of opted-in pods, indexed three ways: by API
// uid, by volume directory (directory events name a directory) and by on-disk pod UID
// (the CSI driver and static pods name that). It keeps the directory watches and the
// pods/volumes gauges in step with the indexes, so the reconciler holds policy only.

import path from 'node:path';
import type { OwnerReference, PodMeta, ProjectedFile } from '../../projections/index.ts';
import type { DirWatcher } from '../volume/dirwatch.ts';
import type { ProjectionError } from '../common/errors.ts';
import type { InvolvedObject } from '../kube/events.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import type { PodVolumesView, ResolvedVolume } from '../volume/resolve.ts';
import type { VolumeTarget } from '../volume/writer.ts';

export type PodView = PodMeta & PodVolumesView & {
  metadata?: { name?: string; namespace?: string; uid?: string } | undefined;
};

export interface Tracked {
  pod: InvolvedObject;
  /** What upsert needs of the pod, kept to look at it again when another pod's arrival changes its verdict. */
  view: PodView;
  /** The pod's directory name under <kubelet>/pods (differs from uid for static pods). */
  diskUid: string;
  owners: readonly OwnerReference[];
  /** The annotation's volumes; `volumes` adds the extra (CSI) targets to them. */
  annotated: ResolvedVolume[];
  volumes: ResolvedVolume[];
  files: ProjectedFile[];
  /** Identifies `files`; a volume is up to date when its synced fingerprint equals this. */
  fingerprint: string;
  synced: Map<string, string>;
  /** Volumes whose disk state must be checked even if the fingerprint matches. */
  verify: Set<string>;
  /** Per volume, the stamp of each file as the agent last left it: tells its own writes from the pod's. */
  stamps: Map<string, Record<string, string>>;
  /** Resolution errors already reported, so status churn does not repeat them. */
  reported: string;
  receivedAt: number;
  /** Set while the pod's files are refused (TooLarge): a CSI publish fails with it. */
  refused: ProjectionError | undefined;
}

/** A tracked volume directory: whose it is, under which volume name. */
export interface DirOwner {
  uid: string;
  volume: string;
  t: Tracked;
}

export class PodTable {
  readonly #pods = new Map<string, Tracked>();
  readonly #byDir = new Map<string, { uid: string; volume: string }>();
  /** On-disk UID -> API uid. */
  readonly #byDisk = new Map<string, string>();
  readonly #dirs: DirWatcher;
  readonly #metrics: Pick<AgentMetrics, 'podsTracked' | 'volumesTracked'>;

  constructor(deps: { dirs: DirWatcher; metrics: Pick<AgentMetrics, 'podsTracked' | 'volumesTracked'> }) {
    this.#dirs = deps.dirs;
    this.#metrics = deps.metrics;
  }

  get(uid: string): Tracked | undefined {
    return this.#pods.get(uid);
  }

  entries(): IterableIterator<[string, Tracked]> {
    return this.#pods.entries();
  }

  /** The tracked pod whose volume `dir` is. */
  atDir(dir: string): DirOwner | undefined {
    const at = this.#byDir.get(dir);
    const t = at && this.#pods.get(at.uid);
    return at && t ? { ...at, t } : undefined;
  }

  /** The tracked pod whose directory under <kubelet>/pods is `diskUid`. */
  onDisk(diskUid: string): { uid: string; t: Tracked } | undefined {
    const uid = this.#byDisk.get(diskUid);
    const t = uid === undefined ? undefined : this.#pods.get(uid);
    return uid !== undefined && t ? { uid, t } : undefined;
  }

  track(uid: string, pod: InvolvedObject, diskUid: string): Tracked {
    const t: Tracked = {
      pod, view: {}, diskUid, owners: [], annotated: [], volumes: [], files: [], fingerprint: '', synced: new Map(), verify: new Set(), stamps: new Map(),
      reported: '', receivedAt: 0, refused: undefined,
    };
    this.#pods.set(uid, t);
    if (!this.#byDisk.has(diskUid)) this.#byDisk.set(diskUid, uid); // never a second pod for one directory
    this.#metrics.podsTracked.set(this.#pods.size);
    return t;
  }

  /** Keep the on-disk UID index right when a pod's accepted directory changes. */
  setDisk(uid: string, t: Tracked, disk: string): void {
    if (t.diskUid === disk) return;
    if (this.#byDisk.get(t.diskUid) === uid) this.#byDisk.delete(t.diskUid);
    t.diskUid = disk;
    if (!this.#byDisk.has(disk)) this.#byDisk.set(disk, uid);
  }

  /** Forgets the pod and stops watching its directories; false if it was not tracked. */
  untrack(uid: string): boolean {
    const t = this.#pods.get(uid);
    if (!t) return false;
    this.setVolumes(uid, t, []);
    this.#pods.delete(uid);
    if (this.#byDisk.get(t.diskUid) === uid) this.#byDisk.delete(t.diskUid);
    this.#metrics.podsTracked.set(this.#pods.size);
    return true;
  }

  /** Makes `volumes` the pod's, watching new directories and dropping the others. */
  setVolumes(uid: string, t: Tracked, volumes: ResolvedVolume[]): void {
    const keep = new Set(volumes.map((v) => dirOf(v.target)));
    for (const v of t.volumes) {
      const dir = dirOf(v.target);
      if (keep.has(dir)) continue;
      this.#byDir.delete(dir);
      this.#dirs.unwatch(dir);
      t.synced.delete(v.name);
      this.#metrics.volumesTracked.dec();
    }
    for (const v of volumes) {
      const dir = dirOf(v.target);
      if (this.#byDir.has(dir)) continue;
      this.#byDir.set(dir, { uid, volume: v.name });
      t.verify.add(v.name); // first sync after (re)start always checks disk: heals crashes
      this.#dirs.watch(dir);
      this.#metrics.volumesTracked.inc();
    }
    t.volumes = volumes;
  }
}

export function dirOf(target: VolumeTarget): string {
  return path.join(target.root, ...target.components);
}

export function podKey(t: Tracked): string {
  return `${t.pod.namespace ?? ''}/${t.pod.name}`;
}
