// One helper per kind of local cluster, so the tests, the benchmarks and the scripts set each
// kind up (and tear it down) one way. A cluster is a control plane of its own plus one kind of
// node:
//
//   startLocalControlPlane   the control plane, an admin client, and a stop() that also deletes
//                            its work directory (else every run leaves one in /tmp)
//   startEmulatorNode        the kubelet emulator on a fresh kubelet root: pods "run" without
//                            containers, on cue (a control plane with `nodeName`, or the shared
//                            test one, whose node globalSetup registered)
//   startRealOrHollowNode    one real node (the kubelet with containerd and runc), or on a machine
//                            that cannot run one, a hollow node in its place
//   startHollowFleet         N hollow kubelets, one after another
// (the last two on a control plane started with `realNodes`)
//
// The node helpers take a running control plane rather than starting one: a benchmark measures
// the control plane alone before the nodes join, and the e2e fixture puts its emulator on the
// shared control plane. The pieces stay in controlplane/, kubelet/ and node/; this file only
// puts them together.

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { controlPlaneBinaries, newWorkDir, startControlPlane, type ControlPlane, type ControlPlaneOptions } from './controlplane/controlplane.ts';
import { startKubeletEmulator, type KubeletEmulator } from './kubelet/emulator.ts';
import { startHollowNode, type HollowNode } from './node/hollow.ts';
import { missingForRealNode, nodeBinaries, nodeImages, startRealNode, type RealNode } from './node/realnode.ts';

/** A control plane of the caller's own, with an admin client on it. */
export interface LocalControlPlane {
  readonly cp: ControlPlane;
  /** Admin credentials (system:masters). */
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  /** Stops every component, then deletes the work directory. Stop the nodes first. */
  stop(): Promise<void>;
}

/**
 * ControlPlaneOptions without the work directory (always a fresh one, $TMPDIR/ownerrefs-cp-*, which
 * the leftover reaper knows). `binDir` defaults to controlPlaneBinaries(), built on a cache miss;
 * the e2e tests pass globalSetup's. Leftovers of dead runs are not reaped here: a second control
 * plane of the same process would count as one (reapLeftoverControlPlanes, where a caller wants it).
 */
export type LocalControlPlaneOptions = Omit<ControlPlaneOptions, 'binDir' | 'workDir'> & { binDir?: string };

export async function startLocalControlPlane(opts: LocalControlPlaneOptions = {}): Promise<LocalControlPlane> {
  const { binDir, ...rest } = opts;
  const cp = await startControlPlane({ ...rest, binDir: binDir ?? await controlPlaneBinaries(), workDir: await newWorkDir() });
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  return {
    cp, kc, core: kc.makeApiClient(CoreV1Api),
    async stop() {
      await cp.stop();
      await rm(cp.workDir, { recursive: true, force: true });
    },
  };
}

/**
 * The kubelet emulator serving the Node `name` from a kubelet root of its own
 * ($TMPDIR/ownerrefs-kubelet-*). The Node must exist and be Ready: the control plane registers
 * it with `nodeName` (nothing here does). stop() ends the emulator, then deletes the root; end
 * the namespaces first if pods on it must finish their graceful deletion (the emulator confirms it).
 */
export interface EmulatorNode {
  readonly name: string;
  readonly kubeletRoot: string;
  readonly kubelet: KubeletEmulator;
  stop(): Promise<void>;
}

export async function startEmulatorNode(opts: { kc: KubeConfig; name: string }): Promise<EmulatorNode> {
  const kubeletRoot = await mkdtemp(path.join(os.tmpdir(), 'ownerrefs-kubelet-'));
  const removeRoot = () => rm(kubeletRoot, { recursive: true, force: true });
  let kubelet: KubeletEmulator;
  try {
    kubelet = await startKubeletEmulator({ kc: opts.kc, nodeName: opts.name, kubeletRoot });
  } catch (err) {
    await removeRoot();
    throw err;
  }
  return {
    name: opts.name, kubeletRoot, kubelet,
    async stop() {
      await kubelet.stop();
      await removeRoot();
    },
  };
}

/**
 * A node that runs real containers, on a control plane started with `realNodes`. With `hollow`
 * (by default, when missingForRealNode() names something this machine lacks) a hollow node
 * stands in: the same volume directories under its kubelet root, no container, so nothing can be
 * read from inside one, and restartKubelet rejects. `hollow: false` insists on a real node (a
 * benchmark of the real kubelet, the demo); startRealNode then fails on what is missing.
 * The binaries and images are built on a cache miss (minutes, cold).
 */
export async function startRealOrHollowNode(opts: { cp: ControlPlane; name: string; hollow?: boolean }): Promise<RealNode> {
  const hollow = opts.hollow ?? missingForRealNode().length > 0;
  if (!hollow) return startRealNode({ cp: opts.cp, name: opts.name, binDir: await nodeBinaries(), imagesDir: await nodeImages() });
  const n = await startHollowNode({ cp: opts.cp, name: opts.name, binDir: await nodeBinaries() });
  return {
    name: n.name, kubeletRoot: n.kubeletRoot, workDir: path.dirname(n.kubeletRoot), logsDir: n.logsDir, stop: () => n.stop(),
    restartKubelet: () => Promise.reject(new Error('a hollow node has no kubelet restart here')),
  };
}

/** Hollow nodes hollow-000, hollow-001, ... on one control plane started with `realNodes`. */
export interface HollowFleet {
  readonly nodes: readonly HollowNode[];
  /** From the first node's start until the last is Ready; the binaries' build (on a miss) not counted. */
  readonly readyMs: number;
  /** Stops every node, even past one that fails to stop; then rethrows the first failure. */
  stop(): Promise<void>;
}

/**
 * `count` hollow nodes, started one after another (each Ready and untainted before the next
 * starts). `memoryRoot`: the kubelet roots on tmpfs, as a `medium: Memory` emptyDir is on a real
 * node (the benchmarks).
 * If one fails to start, those already started are stopped before the error is thrown.
 */
export async function startHollowFleet(opts: { cp: ControlPlane; count: number; memoryRoot?: boolean }): Promise<HollowFleet> {
  const nodes: HollowNode[] = [];
  const stop = async () => {
    const failures: unknown[] = [];
    for (const n of nodes) await n.stop().catch((err: unknown) => failures.push(err));
    if (failures.length > 0) throw failures[0];
  };
  let readyMs: number;
  try {
    const binDir = await nodeBinaries();
    const t0 = performance.now();
    for (let i = 0; i < opts.count; i++) {
      nodes.push(await startHollowNode({ cp: opts.cp, name: `hollow-${String(i).padStart(3, '0')}`, binDir, memoryRoot: opts.memoryRoot }));
    }
    readyMs = performance.now() - t0;
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return { nodes, readyMs, stop };
}
