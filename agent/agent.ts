// Wiring: builds the agent's parts from a config and runs them until stopped.
//
// One pod watch and one node watch feed the agent's two paths:
//   annotations/  the main path: the annotations the KEP's syntax reads (the webhook points
//                 it at them), kept current: one PATCH per ownership change; the kubelet
//                 renders them;
//   files/        the second way: the files of emptyDir volumes that opt in and of CSI
//                 volumes, written here.
// Each event reaches the files first, then the annotations: the files' writes are local and
// quick, the keeper's are paced PATCHes (see `paths`).
// Both read owners through one cache (owners/), and formats come from projections/.

import type http from 'node:http';
import type { Logger } from 'pino';
import type { AgentConfig } from './config.ts';
import { VolumeDirWatcher } from './files/volume/dirwatch.ts';
import { startHealthServer } from './monitoring/health.ts';
import { KubeApiClient } from './kube/client.ts';
import { KubeCredentials } from './kube/kubeconfig.ts';
import { ApiEventSink, REASON_FOLLOW_FORBIDDEN } from './kube/events.ts';
import { BUILTIN_KINDS, OwnerMetadataCache } from './owners/ownermeta.ts';
import { realClock } from './common/clock.ts';
import { Reflector } from './kube/reflector.ts';
import type { RestartReason } from './kube/reflectorcontract.ts';
import { RecoveryPacer } from './kube/pacer.ts';
import { AGENT_MAX_OWNERS, RECOVERY_SPACING_MS } from './common/defaults.ts';
import { F } from './monitoring/logfields.ts';
import { AgentMetrics } from './monitoring/metrics.ts';
import { NodeConfigSource, type NodeView } from './node/nodesource.ts';
import { AnnotationKeeper } from './annotations/keeper.ts';

import { Reconciler } from './files/reconciler.ts';
import { FsVolumeWriter, TEMP_PREFIX } from './files/volume/writer.ts';
import { DRIVER_NAME } from '../projections/names.ts';
import { slimView, type PodView } from './node/podview.ts';
import type { NodeSettings } from './node/nodeconfig.ts';
import type { NodeRef } from '../projections/index.ts';

export interface RunningAgent {
  /** Listening address of the health server (port resolved when 0 was asked for). */
  healthPort: number;
  /** Finish in-flight writes, stop watches, close the server. */
  stop(): Promise<void>;
}

/**
 * What each path is told: every pod event of the node, every owner whose metadata changed,
 * and the node's settings and identity. Both paths take all of it; the list below is the
 * whole fan-out.
 */
interface PodPath {
  replace(items: PodView[]): void;
  upsert(pod: PodView): void;
  remove(pod: PodView): void;
  ownerChanged(ownerUid: string): void;
  ownerInUse(ownerUid: string): boolean;
  setSettings(s: NodeSettings): void;
  setNode(node: NodeRef | undefined): void;
  close(): Promise<void>;
}

export async function startAgent(cfg: AgentConfig, log: Logger): Promise<RunningAgent> {
  const metrics = new AgentMetrics();
  const client = new KubeApiClient(KubeCredentials.load(cfg.kubeconfig), (verb, _path, code) => {
    metrics.apiRequests.inc({ verb, code: String(code) });
  }, { handshakeTimedOut: () => metrics.apiHandshakeTimeouts.inc() });
  const events = new ApiEventSink({ client, node: cfg.nodeName, log });
  // CSI mode only: its module loads gRPC, which an emptyDir-only agent should not pay for.
  const csiMod = cfg.csiSocket ? await import('./files/csi/start.ts') : undefined;
  // Owners' metadata: read for the files of nodes labelled ownerrefs.dev/follow-owners=true, and on
  // every node for pods whose spec reads a chain annotation (the workload's identity).
  const owners = new OwnerMetadataCache({
    client, kinds: [...BUILTIN_KINDS, ...cfg.followKinds], refreshMs: cfg.ownerRefreshMs, clock: realClock, log, maxEntries: AGENT_MAX_OWNERS,
    changed: (uid) => paths.forEach((p) => p.ownerChanged(uid)),
    inUse: (uid) => paths.some((p) => p.ownerInUse(uid)),
    observe: (kind, outcome, why) => metrics.ownerReads.inc({ kind, code: outcome, why }),
    forbidden: (kind, message) => events.warn({ kind: 'Node', name: cfg.nodeName }, REASON_FOLLOW_FORBIDDEN, `following ${kind} owners: ${message}`),
  });
  const reconciler: Reconciler = new Reconciler({
    kubeletRoot: cfg.kubeletRoot,
    writer: new FsVolumeWriter(),
    events,
    log,
    metrics,
    maxBytes: cfg.maxBytes,
    concurrency: cfg.concurrency,
    ...(csiMod ? { csiDriver: DRIVER_NAME } : {}),
    owners,
    dirs: (on) => {
      const dirs = new VolumeDirWatcher(cfg.kubeletRoot, on, (err) => log.warn({ [F.err]: err }, 'directory watch error'),
        (name) => name.startsWith(TEMP_PREFIX));
      metrics.unwatchedVolumes = () => dirs.unwatched;
      return dirs;
    },
  });
  // The annotations the KEP's syntax reads (the webhook points it at them), kept current.
  const keeper: AnnotationKeeper = new AnnotationKeeper({ client, events, log, metrics, owners, qps: cfg.annotationQps });
  const paths: readonly PodPath[] = [reconciler, keeper];
  const nodeConfig = new NodeConfigSource({
    current: () => reconciler.settings,
    apply: (s) => paths.forEach((p) => p.setSettings(s)),
    allocatable: (a) => reconciler.setAllocatable(a), // the files' downwardAPI items read it
    node: (n) => paths.forEach((p) => p.setNode(n)),
    events,
    log,
  });

  const observer = (resource: string) => ({
    watchStarted: (reason: RestartReason) => {
      metrics.watchStarts.inc({ resource, reason });
      log.debug({ [F.resource]: resource, [F.reason]: reason }, 'watch started');
    },
    synced: (how: 'stream' | 'list') => metrics.firstStates.inc({ resource, how }),
    relisted: (reason: RestartReason) => {
      metrics.relists.inc({ resource, reason });
      log.info({ [F.resource]: resource, [F.reason]: reason }, 'relisted');
    },
    failed: (err: unknown, backoffMs: number) => log.warn({ [F.resource]: resource, [F.err]: err, [F.backoffMs]: backoffMs }, 'watch failed; retrying'),
    streamRefused: (err: unknown) => log.info({ [F.resource]: resource, [F.err]: err },
      'the API server does not stream lists (its WatchList feature is off); listing instead'),
  });
  const field = (sel: string) => `fieldSelector=${encodeURIComponent(sel)}`;
  // One pacer for both watches: the bound on requests after a failure is per agent.
  const pacer = new RecoveryPacer({ spacingMs: RECOVERY_SPACING_MS });
  const pods = new Reflector<PodView>({
    resource: 'pods',
    path: `/api/v1/pods?${field(`spec.nodeName=${cfg.nodeName}`)}`,
    client,
    handler: {
      retain: slimView,
      replace: (items) => paths.forEach((p) => p.replace(items)),
      upsert: (pod) => paths.forEach((p) => p.upsert(pod)),
      remove: (pod) => paths.forEach((p) => p.remove(pod)),
    },
    observer: observer('pods'),
    stallMs: cfg.stallMs,
    pacer,
  });
  const node = new Reflector<NodeView>({
    resource: 'nodes',
    path: `/api/v1/nodes?${field(`metadata.name=${cfg.nodeName}`)}`,
    client,
    handler: nodeConfig,
    observer: observer('nodes'),
    stallMs: cfg.stallMs,
    pacer,
  });

  metrics.watchDownFrom('pods', () => pods.downForMs());
  metrics.watchDownFrom('nodes', () => node.downForMs());

  const csi = csiMod && cfg.csiSocket ? await csiMod.startCsi({
    socket: cfg.csiSocket, registrationDir: cfg.registrationDir, kubeletRoot: cfg.kubeletRoot, nodeName: cfg.nodeName,
    pods: reconciler, client, ready: () => pods.synced, log, registry: metrics.registry,
  }) : undefined;

  const ready = (): string[] => [
    ...(pods.synced ? [] : ['pod list not synced yet']),
    ...(nodeConfig.configured ? [] : ['node configuration not read yet']),
    ...(pods.downForMs() > cfg.readyDownMs ? [`pod watch down for ${Math.round(pods.downForMs() / 1000)} s`] : []),
  ];
  const server: http.Server = await startHealthServer({ host: cfg.healthHost, port: cfg.healthPort, ready, registry: metrics.registry });
  const address = server.address();
  const healthPort = typeof address === 'object' && address ? address.port : cfg.healthPort;

  const ac = new AbortController();
  // Node settings first, so the first pod sync already honours pause and file toggles.
  const nodeRun = node.run(ac.signal);
  const podRun = (async () => {
    const aborted = new Promise<void>((r) => ac.signal.addEventListener('abort', () => r(), { once: true }));
    await Promise.race([nodeConfig.whenConfigured, aborted]);
    await pods.run(ac.signal);
  })();
  const resync = setInterval(() => reconciler.resyncAll(), cfg.resyncMs);
  log.info({ kubeletRoot: cfg.kubeletRoot, healthPort }, 'agent started'); // the node is in every line (main.ts's base)

  return {
    healthPort,
    async stop() {
      await csi?.stop(); // no new publishes; in-flight ones finish while the reconciler still runs
      clearInterval(resync);
      ac.abort();
      await Promise.allSettled([nodeRun, podRun]);
      owners.close();
      await Promise.all(paths.map((p) => p.close())); // in-flight writes finish; nothing new starts
      events.close(); // Events waiting to be posted again are given up
      await new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      client.close();
    },
  };
}
