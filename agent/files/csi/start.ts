// CSI mode, wired: find targets published before a restart, serve the CSI Identity and
// Node services on --csi-socket, then register with the kubelet by serving its
// plugin-registration service on a socket in --registration-dir.
//
// Registering ourselves (instead of running the node-driver-registrar sidecar) keeps
// one image and one process: the registrar's whole job is these two RPCs. The kubelet's
// plugin watcher notices the socket, calls GetInfo, checks the CSI socket with
// NodeGetInfo, then calls NotifyRegistrationStatus.

import path from 'node:path';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { ApiError, type ApiClient } from '../../kube/client.ts';
import { F } from '../../monitoring/logfields.ts';
import { KeyedRateLimiter } from '../../common/ratelimit.ts';
import { NodeDriver, type FetchedPod, type PodTargets } from './driver.ts';
import type { VolumeTarget } from '../volume/writer.ts';
import { findPublished } from './restore.ts';
import type { IdentityHandlers, NodeHandlers, RegistrationHandlers } from './messages.ts';
import { serveUnix, type UnixServer } from './server.ts';
import { loadServices } from './services.ts';
import { DRIVER_NAME } from '../../../projections/names.ts';


/** The CSI versions we speak, as the kubelet wants them in PluginInfo.supported_versions. */
const SUPPORTED_VERSIONS = ['1.0.0'];

export interface CsiOptions {
  /** The CSI socket; must be the same path on the host (the kubelet dials what we register). */
  socket: string;
  /** The kubelet's plugins_registry directory; undefined: do not register (a registrar sidecar does). */
  registrationDir: string | undefined;
  kubeletRoot: string;
  nodeName: string;
  pods: PodTargets & { adopt(diskUid: string, volume: string, target: VolumeTarget): void };
  /** For the one GET of a pod the watch has not delivered in time. */
  client: Pick<ApiClient, 'json'>;
  ready(): boolean;
  log: Logger;
  registry: Registry;
  podWaitMs?: number;
}

export interface RunningCsi {
  stop(): Promise<void>;
}

export function registrationSocket(dir: string): string {
  return path.join(dir, `${DRIVER_NAME}-reg.sock`);
}

export async function startCsi(o: CsiOptions): Promise<RunningCsi> {
  const requests = new Counter({
    name: 'ownerrefs_csi_requests_total',
    help: 'CSI and plugin-registration calls served, by method ("refused": refused by the protocol before any handler) and gRPC status code.',
    labelNames: ['method', 'code'] as const,
    registers: [o.registry],
  });
  const observe = (method: string, code: string) => requests.inc({ method, code });
  const onError = (err: unknown) => o.log.error({ [F.err]: err }, 'csi socket error');
  // Only root can call, so a refusal is a kubelet speaking a newer CSI (an rpc we lack) or a
  // confused tool: worth a line, but never a line per call.
  const refusals = new KeyedRateLimiter({ burst: 5, refillMs: 60_000 });
  const onRefused = (code: string, message: string) => {
    const suppressed = refusals.take(code);
    if (suppressed !== null) o.log.warn({ code, [F.err]: message, [F.suppressed]: suppressed || undefined }, 'refused a call on the CSI socket');
  };

  const published = await findPublished(o.kubeletRoot, DRIVER_NAME, o.log);
  for (const p of published) o.pods.adopt(p.diskUid, p.volume, p.target);
  if (published.length > 0) o.log.info({ count: published.length }, 'csi volumes published before the restart are kept current again');

  const driver = new NodeDriver({
    kubeletRoot: o.kubeletRoot,
    nodeName: o.nodeName,
    pods: o.pods,
    getPod: (namespace, name) => getPod(o.client, namespace, name),
    ready: o.ready,
    log: o.log,
    published: new Map(published.map((p) => [p.targetPath, p.volumeId])),
    vendorVersion: packageVersion(),
    ...(o.podWaitMs !== undefined ? { podWaitMs: o.podWaitMs } : {}),
  });
  const identity: IdentityHandlers = {
    GetPluginInfo: () => driver.getPluginInfo(),
    GetPluginCapabilities: () => driver.getPluginCapabilities(),
    Probe: () => driver.probe(),
  };
  const node: NodeHandlers = {
    NodePublishVolume: (req) => driver.nodePublishVolume(req),
    NodeUnpublishVolume: (req) => driver.nodeUnpublishVolume(req),
    NodeGetCapabilities: () => driver.nodeGetCapabilities(),
    NodeGetInfo: () => driver.nodeGetInfo(),
  };
  const registration: RegistrationHandlers = {
    GetInfo: () => ({ type: 'CSIPlugin', name: DRIVER_NAME, endpoint: o.socket, supportedVersions: SUPPORTED_VERSIONS }),
    NotifyRegistrationStatus: (req) => {
      if (req.pluginRegistered) o.log.info({ driver: DRIVER_NAME }, 'registered with the kubelet');
      else o.log.error({ driver: DRIVER_NAME, [F.err]: req.error }, 'the kubelet refused the registration');
      return {};
    },
  };
  const defs = loadServices();
  const servers: UnixServer[] = [];
  try {
    servers.push(await serveUnix(o.socket, [[defs.identity, identity], [defs.node, node]], { observe, onError, onRefused }));
    if (o.registrationDir) {
      // Registered last: the kubelet may call the CSI socket as soon as it sees this one.
      servers.push(await serveUnix(registrationSocket(o.registrationDir), [[defs.registration, registration]], { observe, onError, onRefused }));
    }
  } catch (err) {
    for (const s of servers) await s.stop();
    throw err;
  }
  o.log.info({ socket: o.socket, registrationDir: o.registrationDir }, 'csi driver serving');
  return {
    // Registration first (the kubelet deregisters the driver; a stopped agent leaves
    // no stale registration behind), then the CSI socket after in-flight calls finish.
    async stop() {
      for (const s of servers.reverse()) await s.stop();
    },
  };
}

async function getPod(client: Pick<ApiClient, 'json'>, namespace: string, name: string): Promise<FetchedPod | undefined> {
  try {
    return await client.json<FetchedPod>('GET', `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

function packageVersion(): string {
  // package.json is three levels up from agent/files/csi/ in the source tree, four from dist/agent/files/csi/.
  for (const rel of ['../../../package.json', '../../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'ownerrefs-agent' && pkg.version) return pkg.version;
    } catch { /* not there: try the next */ }
  }
  return 'unknown';
}
