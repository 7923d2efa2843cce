// The CSI Identity and Node services of ownerrefs.dev: a node-only driver for
// ephemeral inline volumes. The kubelet calls NodePublishVolume before it starts any
// container of the pod and waits for the answer, so once we answer OK the files are
// on disk: that is the whole point of CSI mode (no start-up race).
//
// This module is protocol logic only (requests in, responses or CsiError out); the
// gRPC plumbing is server.ts, the message types messages.ts. Requests are taken as
// Partial: the loader fills defaults in, but nothing here relies on it.

import type { Logger } from 'pino';
import { ProjectionError } from '../../common/errors.ts';
import { F } from '../../monitoring/logfields.ts';

import { CSI_POD_WAIT_MS } from '../../common/defaults.ts';
import { describe, isDns1123Label, isDns1123Subdomain } from '../../common/validation.ts';
import { diskUID, usesCsiDriver } from '../volume/resolve.ts';
import type { VolumeTarget } from '../volume/writer.ts';
import type * as M from './messages.ts';
import { parseTargetPath } from './paths.ts';
import { RpcError } from './status.ts';
import { DOWNWARD_API_ATTRIBUTE, DRIVER_NAME } from '../../../projections/names.ts';
import { type PodView } from '../../node/podview.ts';

/** Pod-info keys the kubelet adds to the volume context when the CSIDriver has podInfoOnMount. */
export const POD_INFO = {
  name: 'csi.storage.k8s.io/pod.name',
  namespace: 'csi.storage.k8s.io/pod.namespace',
  uid: 'csi.storage.k8s.io/pod.uid',
  serviceAccount: 'csi.storage.k8s.io/serviceAccount.name',
  ephemeral: 'csi.storage.k8s.io/ephemeral',
} as const;
const KUBELET_PREFIX = 'csi.storage.k8s.io/';

/** gRPC status codes (grpc/doc/statuscodes.md) the driver answers with. */
export const Code = {
  OK: 0, InvalidArgument: 3, NotFound: 5, AlreadyExists: 6, ResourceExhausted: 8,
  FailedPrecondition: 9, Internal: 13, Unavailable: 14,
} as const;
export type CodeValue = (typeof Code)[keyof typeof Code];

/** The driver's errors: a status of the subset above (status.ts answers it as is). */
export class CsiError extends RpcError {
  declare readonly code: CodeValue;
  constructor(code: CodeValue, message: string, cause?: unknown) {
    super(code, message, cause);
    this.name = 'CsiError';
  }
}

/** What the driver needs from the reconciler (see Reconciler's CSI section). */
export interface PodTargets {
  waitForPod(diskUid: string, ms: number): Promise<boolean>;
  upsert(pod: PodView): void;
  publish(diskUid: string, volume: string, target: VolumeTarget): Promise<boolean>;
  unpublish(diskUid: string, volume: string, target: VolumeTarget): Promise<string[]>;
}

export type FetchedPod = PodView & { spec?: { nodeName?: string } };

export interface NodeDriverOptions {
  kubeletRoot: string;
  nodeName: string;
  pods: PodTargets;
  /** One GET of a pod (undefined when it does not exist); used only when the watch is late. */
  getPod(namespace: string, name: string): Promise<FetchedPod | undefined>;
  /** Probe's readiness: the pod list is synced. */
  ready(): boolean;
  log: Logger;
  /** How long a publish waits for the pod to arrive on the watch before it GETs it. */
  podWaitMs?: number;
  /** Target path -> volume id, for targets published before a restart. */
  published?: ReadonlyMap<string, string>;
  vendorVersion?: string;
}

export class NodeDriver {
  readonly #o: NodeDriverOptions;
  /** Target path -> volume id: a second publish of the same target is idempotent, another volume there is refused. */
  readonly #published: Map<string, string>;

  constructor(opts: NodeDriverOptions) {
    this.#o = opts;
    this.#published = new Map(opts.published ?? []);
  }

  getPluginInfo(): M.GetPluginInfoResponse {
    return { name: DRIVER_NAME, vendorVersion: this.#o.vendorVersion ?? 'unknown' };
  }

  /** No controller service, no topology: a node-only driver. */
  getPluginCapabilities(): M.GetPluginCapabilitiesResponse {
    return { capabilities: [] };
  }

  probe(): M.ProbeResponse {
    return { ready: { value: this.#o.ready() } };
  }

  /** Nothing to stage, no stats, no expansion. */
  nodeGetCapabilities(): M.NodeGetCapabilitiesResponse {
    return { capabilities: [] };
  }

  nodeGetInfo(): M.NodeGetInfoResponse {
    return { nodeId: this.#o.nodeName, maxVolumesPerNode: 0 };
  }

  async nodePublishVolume(req: Partial<M.NodePublishVolumeRequest>): Promise<M.NodePublishVolumeResponse> {
    const volumeId = req.volumeId ?? '';
    const targetPath = req.targetPath ?? '';
    if (!volumeId) throw invalid('volume_id is required');
    if (!targetPath) throw invalid('target_path is required');
    if (!req.volumeCapability) throw invalid('volume_capability is required');
    if (req.volumeCapability.block) throw invalid(`${DRIVER_NAME} provides files, not a block device; use it as a filesystem volume`);
    if (!req.readonly) {
      throw invalid(`${DRIVER_NAME} volumes must be read-only: set readOnly: true in the pod's csi volume source ` +
        '(spec.volumes[].csi.readOnly), so that nothing in the pod can change the files the agent keeps');
    }
    const ctx = req.volumeContext ?? {};
    if (ctx[POD_INFO.ephemeral] !== 'true') {
      throw invalid(`${DRIVER_NAME} serves only ephemeral inline volumes: declare it in the pod (spec.volumes[].csi), ` +
        `not as a PersistentVolume, and install the CSIDriver object with podInfoOnMount: true`);
    }
    // DOWNWARD_API_ATTRIBUTE is the retired form, still served (projections/downwardapi.ts).
    const extra = Object.keys(ctx).filter((k) => !k.startsWith(KUBELET_PREFIX) && k !== DOWNWARD_API_ATTRIBUTE);
    if (extra.length > 0) {
      throw invalid(`${DRIVER_NAME} takes one volumeAttribute, ${DOWNWARD_API_ATTRIBUTE} (a downwardAPI volume source as JSON); remove ` +
        `${extra.slice(0, 3).map((k) => describe(k)).join(', ')} from the pod's csi volume source`);
    }
    const uid = ctx[POD_INFO.uid] ?? '';
    const namespace = ctx[POD_INFO.namespace] ?? '';
    const name = ctx[POD_INFO.name] ?? '';
    if (!uid || !namespace || !name) {
      throw invalid(`the volume context lacks the pod's name, namespace or UID; the CSIDriver object ${DRIVER_NAME} must set podInfoOnMount: true`);
    }
    const t = parseTargetPath(this.#o.kubeletRoot, targetPath);
    if (typeof t === 'string') throw invalid(t);
    if (t.diskUid !== uid) throw invalid(`target_path is in the directory of pod ${describe(t.diskUid)}, but the volume context names pod UID ${describe(uid)}`);
    const held = this.#published.get(targetPath);
    if (held !== undefined && held !== volumeId) {
      throw new CsiError(Code.AlreadyExists, `target_path already holds volume ${describe(held)}, not ${describe(volumeId)}`);
    }

    await this.#findPod(uid, namespace, name);
    try {
      if (!(await this.#o.pods.publish(uid, t.volume, t.target))) {
        throw new CsiError(Code.Unavailable, `pod ${namespace}/${name} left this node while its volume was being published`);
      }
    } catch (err) {
      throw toCsiError(err);
    }
    this.#published.set(targetPath, volumeId);
    this.#o.log.info({ [F.pod]: `${namespace}/${name}`, [F.podUID]: uid, [F.volume]: t.volume }, 'csi volume published');
    return {};
  }

  async nodeUnpublishVolume(req: Partial<M.NodeUnpublishVolumeRequest>): Promise<M.NodeUnpublishVolumeResponse> {
    const volumeId = req.volumeId ?? '';
    const targetPath = req.targetPath ?? '';
    if (!volumeId) throw invalid('volume_id is required');
    if (!targetPath) throw invalid('target_path is required');
    const t = parseTargetPath(this.#o.kubeletRoot, targetPath);
    if (typeof t === 'string') throw invalid(t);
    let removed: string[];
    try {
      removed = await this.#o.pods.unpublish(t.diskUid, t.volume, t.target);
    } catch (err) {
      throw toCsiError(err);
    }
    this.#published.delete(targetPath);
    this.#o.log.info({ [F.podUID]: t.diskUid, [F.volume]: t.volume, [F.removed]: removed }, 'csi volume unpublished');
    return {};
  }

  /**
   * The pod normally arrived on the node's pod watch before the kubelet asks (0 API
   * requests). If not, wait a little for it, then GET it once.
   */
  async #findPod(uid: string, namespace: string, name: string): Promise<void> {
    // The kubelet always sends a valid namespace and name: anything else is refused at once,
    // not after the wait for the pod.
    if (!isDns1123Label(namespace) || !isDns1123Subdomain(name)) {
      throw invalid(`the volume context names pod ${describe(`${namespace}/${name}`)}, which is not a valid namespace/name`);
    }
    if (await this.#o.pods.waitForPod(uid, this.#o.podWaitMs ?? CSI_POD_WAIT_MS)) return;
    let pod: FetchedPod | undefined;
    try {
      pod = await this.#o.getPod(namespace, name);
    } catch (err) {
      throw new CsiError(Code.Unavailable, `pod ${namespace}/${name} is not on this node's pod watch yet, and reading it failed: ${String(err)}`, err);
    }
    const where = `pod ${namespace}/${name}`;
    if (!pod) throw new CsiError(Code.NotFound, `${where} does not exist`);
    if (diskUID(pod).uid !== uid) throw new CsiError(Code.NotFound, `${where} has UID ${describe(pod.metadata?.uid ?? '')}, not ${describe(uid)}: it was replaced`);
    if (pod.spec?.nodeName !== this.#o.nodeName) {
      throw new CsiError(Code.FailedPrecondition, `${where} is bound to node ${describe(pod.spec?.nodeName ?? '')}, not ${this.#o.nodeName}`);
    }
    if (!usesCsiDriver(pod, DRIVER_NAME)) throw new CsiError(Code.FailedPrecondition, `${where} declares no csi volume of driver ${DRIVER_NAME}`);
    this.#o.pods.upsert(pod);
  }
}

function invalid(message: string): CsiError {
  return new CsiError(Code.InvalidArgument, message);
}

/** Writer and policy failures, as the status the kubelet logs in the pod's events. */
export function toCsiError(err: unknown): CsiError {
  if (err instanceof CsiError) return err;
  if (!(err instanceof ProjectionError)) return new CsiError(Code.Internal, String(err), err);
  const message = `${err.reason}: ${err.message}`;
  switch (err.reason) {
    case 'TooLarge': return new CsiError(Code.ResourceExhausted, message, err);
    case 'InvalidDownwardAPI': return new CsiError(Code.InvalidArgument, message, err);
    case 'UnsafePath':
    case 'NameTaken':
    case 'VolumeNotFound': return new CsiError(Code.FailedPrecondition, message, err);
    default: return new CsiError(Code.Internal, message, err);
  }
}
