// PodTable: the agent's record of each opted-in pod, and the only code that changes one.
//
// Indexed three ways: by API uid; by volume directory (directory events name a
// directory); by on-disk pod UID (the CSI driver and static pods name that). It keeps
// the directory watches and the pods/volumes gauges in step with the indexes.
//
// A volume is up to date when the fingerprint it was last synced with equals the one it
// should have now and nothing asked for it to be checked on disk (`verify`). Most volumes
// get the pod's files; a CSI volume carrying downwardAPI items (written by hand, or stored
// by an earlier webhook) gets its own, or a refusal when its items cannot be served.

import { createHash } from 'node:crypto';
import type { ProjectionError } from '../common/errors.ts';
import type { InvolvedObject } from '../kube/events.ts';
import type { AgentMetrics } from '../monitoring/metrics.ts';
import type { OwnerReference, ProjectedFile } from '../../projections/index.ts';
import type { DirWatcher } from './volume/dirwatch.ts';
import type { ResolvedVolume } from './volume/resolve.ts';
import type { VolumeTarget } from './volume/writer.ts';
import { joinUnder } from './volume/dirfd.ts';
import { slimView, type PodView } from '../node/podview.ts';

/** A volume's own files (downwardAPI items) and their fingerprint, or why they are refused. */
export type VolumeFiles = { files: readonly ProjectedFile[]; fingerprint: string } | { refused: ProjectionError };

/** One tracked pod. Read-only outside this module: PodTable's methods make every change. */
export interface Tracked {
  readonly pod: InvolvedObject;
  /** What upsert needs of the pod, kept to look at it again when another pod's arrival changes its verdict. */
  readonly view: PodView;
  /** The pod's directory name under <kubelet>/pods (differs from uid for static pods). */
  readonly diskUid: string;
  readonly owners: readonly OwnerReference[];
  /** The annotation's volumes; `volumes` adds the published (CSI) targets to them. */
  readonly annotated: readonly ResolvedVolume[];
  readonly volumes: readonly ResolvedVolume[];
  readonly files: readonly ProjectedFile[];
  /** Identifies `files`. */
  readonly fingerprint: string;
  /** Volumes with files of their own (see VolumeFiles); the others get `files`. */
  readonly volumeFiles: ReadonlyMap<string, VolumeFiles>;
  /** Per volume, the fingerprint last synced there. */
  readonly synced: ReadonlyMap<string, string>;
  /** Per volume, the files that sync left there: the ones it was given, with the bytes in place for those it kept (KeepRule). */
  readonly left: ReadonlyMap<string, readonly ProjectedFile[]>;
  /** Volumes whose disk state must be checked even if the fingerprint matches. */
  readonly verify: ReadonlySet<string>;
  /** Per volume, the stamp of each file as the agent last left it: tells its own writes from the pod's. */
  readonly stamps: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** Resolution errors already reported, so status churn does not repeat them. */
  readonly reported: string;
  /** When the current fingerprint was first seen (propagation latency starts here). */
  readonly receivedAt: number;
  /** Set while the pod's files are refused (TooLarge): a CSI publish fails with it. */
  readonly refused: ProjectionError | undefined;
}

type Mutable = {
  -readonly [K in keyof Tracked]: Tracked[K] extends ReadonlyMap<infer A, infer B> ? Map<A, B>
    : Tracked[K] extends ReadonlySet<infer A> ? Set<A> : Tracked[K];
};

/** A tracked volume directory: whose it is, under which volume name. */
export interface DirOwner {
  uid: string;
  volume: string;
  t: Tracked;
}

export class PodTable {
  readonly #pods = new Map<string, Mutable>();
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
    const t: Mutable = {
      pod, view: {}, diskUid, owners: [], annotated: [], volumes: [], files: [], fingerprint: '', volumeFiles: new Map(), synced: new Map(), left: new Map(), verify: new Set(), stamps: new Map(),
      reported: '', receivedAt: 0, refused: undefined,
    };
    this.#pods.set(uid, t);
    if (!this.#byDisk.has(diskUid)) this.#byDisk.set(diskUid, uid); // never a second pod for one directory
    this.#metrics.podsTracked.set(this.#pods.size);
    return t;
  }

  /** Keep the on-disk UID index right when a pod's accepted directory changes (or another pod let go of it). */
  setDisk(uid: string, t: Tracked, disk: string): void {
    const m = this.#own(t);
    if (m.diskUid === disk) {
      if (!this.#byDisk.has(disk)) this.#byDisk.set(disk, uid);
      return;
    }
    if (this.#byDisk.get(m.diskUid) === uid) this.#byDisk.delete(m.diskUid);
    m.diskUid = disk;
    if (!this.#byDisk.has(disk)) this.#byDisk.set(disk, uid);
  }

  /** Forgets the pod and stops watching its directories; false if it was not tracked. */
  untrack(uid: string): boolean {
    const t = this.#pods.get(uid);
    if (!t) return false;
    this.setVolumes(uid, t, [], []);
    this.#pods.delete(uid);
    if (this.#byDisk.get(t.diskUid) === uid) this.#byDisk.delete(t.diskUid);
    this.#metrics.podsTracked.set(this.#pods.size);
    return true;
  }

  /** The pod as last seen, and whether its files are refused. */
  setView(t: Tracked, pod: PodView, refused: ProjectionError | undefined): void {
    const m = this.#own(t);
    m.view = slimView(pod);
    m.refused = refused;
  }

  /**
   * Makes `annotated` plus `published` the pod's volumes, watching new directories and
   * dropping the others. A new volume is checked on disk at its first sync (heals crashes).
   * True when a volume was added.
   */
  setVolumes(uid: string, t: Tracked, annotated: readonly ResolvedVolume[], published: readonly ResolvedVolume[]): boolean {
    const m = this.#own(t);
    const volumes = [...annotated, ...published];
    const keep = new Set(volumes.map((v) => dirOf(v.target)));
    for (const v of m.volumes) {
      const dir = dirOf(v.target);
      if (keep.has(dir)) continue;
      this.#byDir.delete(dir);
      this.#dirs.unwatch(dir);
      m.synced.delete(v.name);
      m.left.delete(v.name);
      this.#metrics.volumesTracked.dec();
    }
    let added = false;
    for (const v of volumes) {
      const dir = dirOf(v.target);
      if (this.#byDir.has(dir)) continue;
      this.#byDir.set(dir, { uid, volume: v.name });
      m.verify.add(v.name);
      this.#dirs.watch(dir);
      this.#metrics.volumesTracked.inc();
      added = true;
    }
    m.annotated = annotated;
    m.volumes = volumes;
    return added;
  }

  /**
   * New files for the pod, and for volumes with files of their own (kept as they are when
   * `volumeFiles` is not given); false (and nothing changes) when they are the ones it has.
   */
  setFiles(t: Tracked, files: readonly ProjectedFile[], owners: readonly OwnerReference[], now: number,
    volumeFiles?: ReadonlyMap<string, readonly ProjectedFile[] | ProjectionError>): boolean {
    const fingerprint = fingerprintOf(files);
    const next = volumeFiles === undefined ? t.volumeFiles : new Map([...volumeFiles].map(([name, f]): [string, VolumeFiles] =>
      [name, Array.isArray(f) ? { files: f, fingerprint: fingerprintOf(f) } : { refused: f as ProjectionError }]));
    const key = (m: ReadonlyMap<string, VolumeFiles>) => [...m].map(([n, v]) => `${n}\0${'refused' in v ? `!${v.refused.message}` : v.fingerprint}`).join('\0\0');
    if (fingerprint === t.fingerprint && (next === t.volumeFiles || key(next) === key(t.volumeFiles))) return false;
    const m = this.#own(t);
    Object.assign(m, { files, owners, fingerprint, volumeFiles: next, receivedAt: now });
    return true;
  }

  /** True when some volume has not been synced with the files it should hold. */
  behind(t: Tracked): boolean {
    return t.volumes.some((v) => !refusedIn(t, v.name) && t.synced.get(v.name) !== fingerprintFor(t, v.name));
  }

  /** True when the volume holds the files it should and nothing asked to check it on disk. */
  upToDate(t: Tracked, volume: string): boolean {
    return t.synced.get(volume) === fingerprintFor(t, volume) && !t.verify.has(volume);
  }

  /** Ask for the volume (every volume without a name) to be checked on disk at its next sync. */
  verify(t: Tracked, volume?: string): void {
    const m = this.#own(t);
    for (const v of volume === undefined ? m.volumes.map((x) => x.name) : [volume]) m.verify.add(v);
  }

  /** Whether the volume was to be checked on disk; the request is consumed. */
  takeVerify(t: Tracked, volume: string): boolean {
    return this.#own(t).verify.delete(volume);
  }

  /** A sync of `volume` left `files` (identified by `fingerprint`) there, with these stamps. */
  synced(t: Tracked, volume: string, fingerprint: string, files: readonly ProjectedFile[], stamps: Record<string, string>): void {
    const m = this.#own(t);
    m.synced.set(volume, fingerprint);
    m.left.set(volume, files);
    m.stamps.set(volume, stamps);
  }

  /** A sync failed: what is on disk is unknown, so check it next time. */
  unknown(t: Tracked, volume: string): void {
    const m = this.#own(t);
    m.synced.delete(volume);
    m.left.delete(volume);
    m.stamps.delete(volume);
    m.verify.add(volume);
  }

  /** Records the resolution errors reported; false when they are the ones reported last. */
  reported(t: Tracked, key: string): boolean {
    if (key === t.reported) return false;
    this.#own(t).reported = key;
    return true;
  }

  #own(t: Tracked): Mutable {
    return t as Mutable; // every Tracked is made by track(), as a Mutable
  }
}

/** The files `volume` should hold. */
export function filesFor(t: Tracked, volume: string): readonly ProjectedFile[] {
  const own = t.volumeFiles.get(volume);
  return own === undefined ? t.files : 'files' in own ? own.files : [];
}

export function fingerprintFor(t: Tracked, volume: string): string {
  const own = t.volumeFiles.get(volume);
  return own === undefined ? t.fingerprint : 'files' in own ? own.fingerprint : '';
}

/** Why `volume`'s own files cannot be served, if they cannot. */
export function refusedIn(t: Tracked, volume: string): ProjectionError | undefined {
  const own = t.volumeFiles.get(volume);
  return own !== undefined && 'refused' in own ? own.refused : undefined;
}

/** True when the volume holds downwardAPI items rather than the agent's own files. */
export function hasOwnFiles(t: Tracked, volume: string): boolean {
  return t.volumeFiles.has(volume);
}

export function dirOf(target: VolumeTarget): string {
  return joinUnder(target.root, target.components);
}

export function podKey(t: Tracked): string {
  return `${t.pod.namespace ?? ''}/${t.pod.name}`;
}

/**
 * Identifies a list of files (paths, modes, bytes, in order): equal lists, equal strings.
 * A digest rather than the bytes themselves: each pod keeps one, and making it allocated
 * a copy of every file. SHA-256, so that no pod author can make two lists collide.
 */
function fingerprintOf(files: readonly ProjectedFile[]): string {
  if (files.length === 0) return '';
  const h = createHash('sha256');
  for (const f of files) h.update(`${f.path}\0${f.mode}\0${f.bytes.length}\0`).update(f.bytes);
  return h.digest('base64');
}
