// A kubelet stand-in for e2e tests. It does the parts of a kubelet's job the
// agent can observe: lays out emptyDir volume directories under
// <kubeletRoot>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>, reports
// pods Running/Ready, and completes graceful deletion (tear down volumes, then
// delete with gracePeriodSeconds=0) which otherwise never finishes for a pod
// bound to a node.
import { chmod, mkdir, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoreV1Api, PatchStrategy, setHeaderOptions, Watch, type KubeConfig, type V1Pod,
} from '@kubernetes/client-node';
import { isRunningReady, runningStatus } from './status.ts';

export const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

export interface KubeletEmulatorOptions {
  kc: KubeConfig;
  nodeName: string;
  kubeletRoot: string;
  // false: never create volume dirs (tests of an agent facing missing dirs).
  createDirs?: boolean;
}

export interface KubeletEmulator {
  readonly nodeName: string;
  readonly kubeletRoot: string;
  // Errors from API calls the emulator will retry; handy in failure messages.
  readonly errors: readonly string[];
  // `uid` may be an API uid or an on-disk uid; while the emulator knows the
  // pod, a mirror pod's API uid maps to the uid in its config.mirror annotation
  // (once the pod is gone, pass the on-disk uid).
  podDir(uid: string): string;
  volumeDir(uid: string, volumeName: string): string;
  removeVolumeDir(uid: string, volumeName: string): Promise<void>;
  waitForVolumeDir(uid: string, volumeName: string, opts?: { timeoutMs?: number }): Promise<string>;
  stop(): Promise<void>;
}

const strategicMerge = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const RETRY_MS = 500;

function apiCode(err: unknown): number | undefined {
  return (err as { code?: number; statusCode?: number }).code ?? (err as { statusCode?: number }).statusCode;
}

// A mirror value is pod-controlled: one that is not a single safe path component is
// ignored (the emulator would otherwise mkdir, and on deletion rm -rf, a traversing path).
function diskUid(pod: V1Pod): string {
  const mirror = pod.metadata?.annotations?.[MIRROR_ANNOTATION];
  return mirror !== undefined && /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(mirror) ? mirror : pod.metadata!.uid!;
}

class Emulator implements KubeletEmulator {
  readonly nodeName: string;
  readonly kubeletRoot: string;
  readonly errors: string[] = [];
  private readonly kc: KubeConfig;
  private readonly core: CoreV1Api;
  private readonly createDirs: boolean;
  private readonly fieldSelector: string;
  // Latest object per API uid; absent once the pod is gone.
  private readonly latest = new Map<string, V1Pod>();
  // API uid -> on-disk uid, kept until the pod's directory is removed.
  private readonly onDisk = new Map<string, string>();
  private readonly queue: string[] = [];
  // "uid/volume" removed by removeVolumeDir: never recreated.
  private readonly tornDown = new Set<string>();
  private readonly queued = new Set<string>();
  private working: Promise<void> | undefined;
  private watchAbort: AbortController | undefined;
  private resourceVersion = '';
  private stopped = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(opts: KubeletEmulatorOptions) {
    this.kc = opts.kc;
    this.core = opts.kc.makeApiClient(CoreV1Api);
    this.nodeName = opts.nodeName;
    this.kubeletRoot = opts.kubeletRoot;
    this.createDirs = opts.createDirs ?? true;
    this.fieldSelector = `spec.nodeName=${opts.nodeName}`;
  }

  async start(): Promise<void> {
    await mkdir(join(this.kubeletRoot, 'pods'), { recursive: true });
    await this.relist();
    this.loop = this.run();
  }

  podDir(uid: string): string {
    return join(this.kubeletRoot, 'pods', this.onDisk.get(uid) ?? uid);
  }

  volumeDir(uid: string, volumeName: string): string {
    return join(this.podDir(uid), 'volumes', 'kubernetes.io~empty-dir', volumeName);
  }

  // Like a kubelet tearing a volume down: it is not set up again for this pod.
  async removeVolumeDir(uid: string, volumeName: string): Promise<void> {
    this.tornDown.add(`${uid}/${volumeName}`);
    // Retried, as the kubelet's volume manager retries a teardown on every reconcile: an agent
    // may rename a file in between readdir and rmdir while a burst of updates is still in flight.
    await rm(this.volumeDir(uid, volumeName), { recursive: true, force: true, maxRetries: 100, retryDelay: 10 });
  }

  async waitForVolumeDir(uid: string, volumeName: string, opts: { timeoutMs?: number } = {}): Promise<string> {
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    for (;;) {
      const dir = this.volumeDir(uid, volumeName);
      if (existsSync(dir)) return dir;
      if (Date.now() > deadline) {
        throw new Error(`volume dir ${dir} never appeared; emulator errors: ${this.errors.slice(-5).join(' | ')}`);
      }
      await sleep(50);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watchAbort?.abort();
    await this.loop;
    await this.working;
  }

  private note(what: string, err: unknown): void {
    this.errors.push(`${new Date().toISOString()} ${what}: ${(err as Error).message ?? String(err)}`);
    if (this.errors.length > 100) this.errors.shift();
  }

  private observe(pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    this.latest.set(uid, pod);
    this.onDisk.set(uid, diskUid(pod));
    this.enqueue(uid);
  }

  private forget(uid: string): void {
    this.latest.delete(uid);
    this.enqueue(uid);
  }

  private async relist(): Promise<void> {
    const list = await this.core.listPodForAllNamespaces({ fieldSelector: this.fieldSelector });
    const seen = new Set<string>();
    for (const pod of list.items) {
      seen.add(pod.metadata!.uid!);
      this.observe(pod);
    }
    // Pods deleted while we were not watching.
    for (const uid of [...this.onDisk.keys()]) if (!seen.has(uid)) this.forget(uid);
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
  }

  // list+watch until stopped; a 410 (resourceVersion compacted away) relists.
  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        await this.watchOnce();
      } catch (err) {
        if (this.stopped) break;
        this.note('list/watch', err);
        // Expired as an HTTP status rather than an in-stream ERROR event: relist, or the
        // emulator would retry the same resourceVersion forever and stop making volumes.
        if ((err as { statusCode?: number }).statusCode === 410) this.resourceVersion = '';
        await sleep(RETRY_MS);
      }
    }
  }

  private watchOnce(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onEvent = (type: string, obj: V1Pod & { code?: number }): void => {
        if (type === 'ERROR') {
          if (obj.code === 410) this.resourceVersion = '';
          this.watchAbort?.abort();
          return;
        }
        const rv = obj.metadata?.resourceVersion;
        if (rv) this.resourceVersion = rv;
        if (type === 'ADDED' || type === 'MODIFIED') this.observe(obj);
        else if (type === 'DELETED' && obj.metadata?.uid) this.forget(obj.metadata.uid);
      };
      const onDone = (err: unknown): void => {
        // Inactivity timeouts and server-side closes just mean "watch again".
        if (err && !this.stopped && (err as Error).name !== 'AbortError' && (err as Error).name !== 'TimeoutError') {
          reject(err instanceof Error ? err : new Error(String(err)));
        } else resolve();
      };
      new Watch(this.kc).watch('/api/v1/pods', {
        fieldSelector: this.fieldSelector,
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        // Like the agent: the server ends the watch every 5-10 min and we resume, rather than
        // one watch living until the server's own 30-60 min limit (long soaks reach it).
        timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      }, onEvent, onDone).then((ctrl) => {
        this.watchAbort = ctrl;
        if (this.stopped) ctrl.abort();
      }, reject);
    });
  }

  private enqueue(uid: string): void {
    if (this.stopped) return;
    if (!this.queued.has(uid)) {
      this.queued.add(uid);
      this.queue.push(uid);
    }
    this.working ??= this.drain().finally(() => {
      this.working = undefined;
    });
  }

  // One pod at a time, always against the newest state we have seen for it,
  // so a retried failure can never resurrect an outdated view of the pod.
  private async drain(): Promise<void> {
    while (this.queue.length > 0 && !this.stopped) {
      const uid = this.queue.shift()!;
      this.queued.delete(uid);
      try {
        await this.sync(uid);
      } catch (err) {
        this.note(`sync ${uid}`, err);
        setTimeout(() => this.enqueue(uid), RETRY_MS).unref();
      }
    }
  }

  private async sync(uid: string): Promise<void> {
    const pod = this.latest.get(uid);
    if (!pod) {
      await rm(this.podDir(uid), { recursive: true, force: true, maxRetries: 10, retryDelay: 10 });
      this.onDisk.delete(uid);
      return;
    }
    const { name, namespace } = pod.metadata as { name: string; namespace: string };
    if (pod.metadata?.deletionTimestamp) {
      // Like the kubelet: volumes are torn down before deletion is confirmed.
      await rm(this.podDir(uid), { recursive: true, force: true, maxRetries: 10, retryDelay: 10 });
      try {
        await this.core.deleteNamespacedPod({
          name, namespace, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid } },
        });
      } catch (err) {
        // 404: already gone; 409: uid precondition failed, a new pod took the name.
        if (apiCode(err) !== 404 && apiCode(err) !== 409) throw err;
      }
      return;
    }
    if (this.createDirs) {
      for (const v of pod.spec?.volumes ?? []) {
        if (!v.emptyDir || this.tornDown.has(`${uid}/${v.name}`)) continue;
        const dir = this.volumeDir(uid, v.name);
        await mkdir(dir, { recursive: true });
        // The kubelet creates emptyDirs world-writable regardless of umask.
        await chmod(dir, 0o777);
      }
    }
    if (!isRunningReady(pod)) {
      try {
        await this.core.patchNamespacedPodStatus({ name, namespace, body: runningStatus(pod) }, strategicMerge);
      } catch (err) {
        if (apiCode(err) !== 404) throw err;
      }
    }
  }
}

export async function startKubeletEmulator(opts: KubeletEmulatorOptions): Promise<KubeletEmulator> {
  const emulator = new Emulator(opts);
  await emulator.start();
  return emulator;
}
