// A real single-node Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) on loopback, for e2e tests.
// Process lifetime and leftover cleanup are described in process.ts.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { generatePki, issueCert, writeKubeconfig, type KeyPair, type Pki } from './certs.ts';
import { startEgressProxy, type EgressProxy } from './egress.ts';
import { tailFile } from './logs.ts';
import { freePort, httpCall, waitHealthy } from './net.ts';
import { createTestNode } from './node.ts';
import { reapStale, Supervisor, type Component, type SpawnSpec } from './process.ts';

// Every harness workDir lives under this prefix so a later run can find and
// reap what a crashed run left behind.
export const WORKDIR_PREFIX = 'ownerrefs-cp-';

/**
 * The older Kubernetes release the local cluster runs, from OWNERREFS_K8S: a minor ("1.31"),
 * or "oldest" for the oldest this project supports; undefined (unset) for the release it is
 * developed on. localcluster/versions/build.sh builds each older one from its pinned module.
 */
export function olderRelease(): string | undefined {
  const v = process.env.OWNERREFS_K8S;
  if (!v) return undefined;
  if (v === 'oldest' || /^1\.\d+$/.test(v)) return v;
  throw new Error(`OWNERREFS_K8S=${v}: use "oldest" or a minor release such as 1.31 (localcluster/versions/)`);
}

/**
 * The directory with etcd, the control plane's binaries and kubectl: the release the project
 * is developed on, or the older one OWNERREFS_K8S names (whose directory also holds its
 * kubelet). Built on a cache miss (minutes, cold); the build's progress goes to our stderr.
 */
export function controlPlaneBinaries(): Promise<string> {
  const older = olderRelease();
  const [script, ...args] = older ? [join(import.meta.dirname, '..', 'versions', 'build.sh'), older] : [join(import.meta.dirname, 'build.sh')];
  return new Promise((resolve, reject) => {
    const child = execFile('bash', [script!, ...args], { maxBuffer: 1 << 20 }, (err, stdout) => {
      if (err) reject(new Error(`${script} failed: ${err.message}`));
      else resolve(stdout.trim().split('\n').pop() ?? '');
    });
    child.stderr?.pipe(process.stderr);
  });
}

export function newWorkDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), WORKDIR_PREFIX));
}

// Kills the processes of control planes whose runner has died and deletes
// their workDirs; live runs (owner pid alive) are left alone.
export async function reapLeftoverControlPlanes(): Promise<void> {
  for (const entry of readdirSync(tmpdir())) {
    if (entry.startsWith(WORKDIR_PREFIX)) await reapStale(join(tmpdir(), entry));
  }
}

export interface ControlPlaneOptions {
  binDir: string;
  workDir: string;
  // When set, a Ready node of this name is registered once everything is up.
  nodeName?: string;
  /**
   * Real kubelets will join (localcluster/node): run node lifecycle (else the kubelet's
   * not-ready taint is never lifted), and route the API server's connections to kubelets
   * (exec, logs) through a loopback proxy, since they listen on 127.0.0.1 only; a Service's
   * pods (a webhook's) are called at their IPs on the node's bridge.
   */
  realNodes?: boolean;
  /** kube-apiserver's --feature-gates, e.g. "WatchList=false" to stand in for a 1.33 server. */
  apiserverFeatureGates?: string;
}

export interface ControlPlanePids {
  etcd: number;
  apiserver: number | undefined;
  controllerManager: number | undefined;
  scheduler: number | undefined;
}

export interface ControlPlane {
  server: string;
  // Plain-HTTP etcd client URL, for tests that inspect or poke storage.
  etcdUrl: string;
  kubeconfigPath: string;
  caPath: string;
  workDir: string;
  logsDir: string;
  // Whether the optional components were found in binDir and started.
  components: { controllerManager: boolean; scheduler: boolean };
  /** A client certificate signed by the cluster CA (a kubelet's, say), kept in the PKI dir. */
  issueClientCert(name: string, subject: string): Promise<KeyPair>;
  readonly pids: ControlPlanePids;
  stop(): Promise<void>;
  // SIGTERM + start again: same port, same etcd data.
  restartApiserver(): Promise<void>;
  // SIGKILL, no graceful shutdown; pair with startApiserver().
  killApiserver(): Promise<void>;
  startApiserver(): Promise<void>;
  // Compacts etcd up to its current revision, so older resourceVersions expire.
  compact(): Promise<void>;
}

// Startup bounds are generous: a cold apiserver on a loaded 2-core machine
// can take a while to finish its post-start hooks.
const STARTUP_TIMEOUT_MS = 180_000;
const SERVICE_CIDR = '10.0.0.0/24';

// Controllers a test cluster needs: workload owners, GC, namespace cleanup and
// service-account plumbing, and the kube-root-ca.crt ConfigMap every service-account
// token volume needs. No node-lifecycle unless real kubelets join: it would mark the
// fake node (no heartbeats) NotReady and taint it. With real kubelets, EndpointSlices too
// (the API server calls a Service's ready pods through them: --enable-aggregator-routing)
// and disruption (a PodDisruptionBudget's status, which evictions check).
const CONTROLLERS = 'daemonset,replicaset,deployment,statefulset,job,cronjob,garbagecollector,serviceaccount-token,namespace,serviceaccount,root-ca-cert-publisher';
const NODE_CONTROLLERS = 'nodelifecycle,endpointslice,disruption';

function logHint(logsDir: string, name: string): () => string {
  return () => `\n--- ${name}.log ---\n${tailFile(join(logsDir, `${name}.log`), 40)}`;
}

function servingArgs(pki: Pki, port: number): string[] {
  return [`--bind-address=127.0.0.1`, `--secure-port=${port}`,
    `--tls-cert-file=${pki.serving.cert}`, `--tls-private-key-file=${pki.serving.key}`];
}

export async function startControlPlane(opts: ControlPlaneOptions): Promise<ControlPlane> {
  const { binDir, workDir } = opts;
  const logsDir = join(workDir, 'logs');
  // A previous run that used this same workDir may have left processes behind.
  await reapStale(workDir);
  await mkdir(logsDir, { recursive: true });
  const bin = (name: string): string => join(binDir, name);
  for (const required of ['etcd', 'kube-apiserver']) {
    if (!existsSync(bin(required))) throw new Error(`${bin(required)} not found`);
  }
  const components = {
    controllerManager: existsSync(bin('kube-controller-manager')),
    scheduler: existsSync(bin('kube-scheduler')),
  };

  const pki = await generatePki(join(workDir, 'pki'));
  const [etcdClient, etcdPeer, apiPort, cmPort, schedPort] = await Promise.all(
    [freePort(), freePort(), freePort(), freePort(), freePort()]);
  const server = `https://127.0.0.1:${apiPort}`;
  const etcdUrl = `http://127.0.0.1:${etcdClient}`;
  const kubeconfigPath = join(workDir, 'admin.kubeconfig');
  const cmKubeconfig = join(workDir, 'controller-manager.kubeconfig');
  const schedKubeconfig = join(workDir, 'scheduler.kubeconfig');
  await writeKubeconfig(kubeconfigPath, server, pki.caCert, pki.admin, 'admin');
  await writeKubeconfig(cmKubeconfig, server, pki.caCert, pki.controllerManager, 'kube-controller-manager');
  await writeKubeconfig(schedKubeconfig, server, pki.caCert, pki.scheduler, 'kube-scheduler');
  const schedConfig = join(workDir, 'scheduler-config.json');
  await writeFile(schedConfig, JSON.stringify({
    apiVersion: 'kubescheduler.config.k8s.io/v1',
    kind: 'KubeSchedulerConfiguration',
    clientConnection: { kubeconfig: schedKubeconfig },
    leaderElection: { leaderElect: false },
  }));

  // Real kubelets: the API server reaches them through this proxy, with this client cert.
  let egress: EgressProxy | undefined;
  const kubeletArgs: string[] = [];
  if (opts.realNodes) {
    egress = await startEgressProxy(join(workDir, 'egress.sock'));
    const egressConfig = join(workDir, 'egress-selector.json');
    await writeFile(egressConfig, JSON.stringify({
      apiVersion: 'apiserver.k8s.io/v1beta1', kind: 'EgressSelectorConfiguration',
      egressSelections: [{ name: 'cluster', connection: { proxyProtocol: 'HTTPConnect', transport: { uds: { udsName: egress.socket } } } }],
    }));
    const toKubelet = await issueCert(pki, 'apiserver-kubelet-client', '/O=system:masters/CN=kube-apiserver-kubelet-client', 'client_ext');
    kubeletArgs.push(`--egress-selector-config-file=${egressConfig}`, `--kubelet-client-certificate=${toKubelet.cert}`,
      `--kubelet-client-key=${toKubelet.key}`, '--kubelet-preferred-address-types=InternalIP,Hostname',
      // No kube-proxy here: a webhook behind a Service is called at one of its ready pods'
      // IPs (from its EndpointSlices), which the egress proxy reaches on the node's bridge.
      '--enable-aggregator-routing=true');
  }

  const sup = new Supervisor(workDir, logsDir);
  const adminTls = { ca: pki.caCert, cert: pki.admin.cert, key: pki.admin.key };

  const etcdSpec: SpawnSpec = {
    name: 'etcd',
    bin: bin('etcd'),
    args: [
      '--name=ownerrefs-test', `--data-dir=${join(workDir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`, `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=ownerrefs-test=http://127.0.0.1:${etcdPeer}`,
      // Durability across host crashes is irrelevant for a throwaway cluster.
      '--unsafe-no-fsync',
    ],
  };
  const apiSpec: SpawnSpec = {
    name: 'kube-apiserver',
    bin: bin('kube-apiserver'),
    args: [
      ...servingArgs(pki, apiPort),
      '--advertise-address=127.0.0.1',
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${join(workDir, 'apiserver-certs')}`,
      `--client-ca-file=${pki.caCert}`,
      '--authorization-mode=Node,RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // The point of the exercise: ownerReferences with blockOwnerDeletion need
      // delete/finalizers rights on the owner, as on a production cluster.
      '--enable-admission-plugins=OwnerReferencesPermissionEnforcement',
      // Endpoints validation rejects loopback IPs, so reconciling the
      // `kubernetes` service endpoints to 127.0.0.1 only produces log spam.
      '--endpoint-reconciler-type=none',
      // Without a requestheader CA the controller-manager and scheduler log an
      // error on every authentication-config refresh. No proxy cert is issued.
      `--requestheader-client-ca-file=${pki.caCert}`,
      '--requestheader-allowed-names=front-proxy-client',
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      '--allow-privileged=true',
      '--profiling=false',
      '--shutdown-watch-termination-grace-period=2s',
      ...kubeletArgs,
      ...(opts.apiserverFeatureGates ? [`--feature-gates=${opts.apiserverFeatureGates}`] : []),
    ],
  };
  const cmSpec: SpawnSpec = {
    name: 'kube-controller-manager',
    bin: bin('kube-controller-manager'),
    args: [
      ...servingArgs(pki, cmPort),
      `--kubeconfig=${cmKubeconfig}`,
      `--authentication-kubeconfig=${cmKubeconfig}`,
      `--authorization-kubeconfig=${cmKubeconfig}`,
      '--leader-elect=false',
      `--controllers=${opts.realNodes ? `${CONTROLLERS},${NODE_CONTROLLERS}` : CONTROLLERS}`,
      // Each controller acts as its own service account, as on kubeadm
      // clusters, so RBAC and owner-reference admission see real identities.
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${pki.saKey}`,
      `--root-ca-file=${pki.caCert}`,
    ],
  };
  const schedSpec: SpawnSpec = {
    name: 'kube-scheduler',
    bin: bin('kube-scheduler'),
    args: [
      ...servingArgs(pki, schedPort),
      `--config=${schedConfig}`,
      `--authentication-kubeconfig=${schedKubeconfig}`,
      `--authorization-kubeconfig=${schedKubeconfig}`,
    ],
  };

  let etcd: Component | undefined;
  let apiserver: Component | undefined;
  let cm: Component | undefined;
  let sched: Component | undefined;

  const healthz = (c: Component, port: number, path: string): Promise<void> =>
    waitHealthy(c.name, async () => (await httpCall(`https://127.0.0.1:${port}${path}`,
      { tls: c === apiserver ? adminTls : { ca: pki.caCert } })).status === 200,
    { timeoutMs: STARTUP_TIMEOUT_MS, dead: () => c.exited, logHint: logHint(logsDir, c.name) });

  const startApiserver = async (): Promise<void> => {
    if (apiserver && !apiserver.exited) throw new Error('kube-apiserver is already running');
    apiserver = sup.spawn(apiSpec);
    await healthz(apiserver, apiPort, '/readyz');
  };

  try {
    etcd = sup.spawn(etcdSpec);
    const etcdProc = etcd;
    await waitHealthy('etcd', async () => {
      const r = await httpCall(`${etcdUrl}/health`);
      return r.status === 200 && r.body.includes('"true"');
    }, { timeoutMs: STARTUP_TIMEOUT_MS, dead: () => etcdProc.exited, logHint: logHint(logsDir, 'etcd') });
    await startApiserver();
    if (components.controllerManager) cm = sup.spawn(cmSpec);
    if (components.scheduler) sched = sup.spawn(schedSpec);
    await Promise.all([
      cm ? healthz(cm, cmPort, '/healthz') : undefined,
      sched ? healthz(sched, schedPort, '/healthz') : undefined,
    ]);
    if (opts.nodeName !== undefined) {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      await createTestNode(kc, opts.nodeName);
    }
  } catch (err) {
    await sup.close();
    await egress?.close();
    throw err;
  }

  return {
    server,
    etcdUrl,
    kubeconfigPath,
    caPath: pki.caCert,
    workDir,
    logsDir,
    components,
    issueClientCert: (name, subject) => issueCert(pki, name, subject, 'client_ext'),
    get pids(): ControlPlanePids {
      const live = (c: Component | undefined): number | undefined => (c && !c.exited ? c.pid : undefined);
      return { etcd: etcd!.pid, apiserver: live(apiserver), controllerManager: live(cm), scheduler: live(sched) };
    },
    stop: async () => {
      // Clients first, so nothing logs connection errors against a dying apiserver.
      await Promise.all([cm, sched].map((c) => (c ? sup.terminate(c) : undefined)));
      if (apiserver) await sup.terminate(apiserver);
      if (etcd) await sup.terminate(etcd);
      await sup.close();
      await egress?.close();
    },
    restartApiserver: async () => {
      if (apiserver) await sup.terminate(apiserver);
      await startApiserver();
    },
    killApiserver: async () => {
      if (apiserver) await sup.kill(apiserver);
    },
    startApiserver,
    compact: async () => {
      const status = await httpCall(`${etcdUrl}/v3/maintenance/status`, { method: 'POST', body: '{}' });
      const revision = (JSON.parse(status.body) as { header?: { revision?: string } }).header?.revision;
      if (!revision) throw new Error(`etcd status without revision: ${status.body}`);
      const r = await httpCall(`${etcdUrl}/v3/kv/compaction`,
        { method: 'POST', body: JSON.stringify({ revision, physical: true }) });
      if (r.status !== 200) throw new Error(`etcd compaction failed: ${r.status} ${r.body}`);
    },
  };
}
