// Several webhook replicas behind one registration, on a control plane with no cluster
// network: the way a cluster runs them (clientConfig.service), with the API server's own
// endpoint routing doing the spreading.
//
// Why this way: the control plane for real kubelets (startBenchCluster's realNodes) runs
// with --enable-aggregator-routing=true, so the API server resolves a webhook's Service to
// one of its ready EndpointSlice endpoints itself, at random, each time it opens a connection
// (apiserver pkg/util/webhook/client.go dials through the resolver; HTTP/1.1 only, for that
// spreading). EndpointSlice validation refuses loopback addresses, so each replica's slice
// names ENDPOINT_IP, which is never dialled: the API server reaches a Service through the
// harness's "cluster" egress proxy (localcluster/controlplane/egress.ts), which connects to
// 127.0.0.1 at the slice's port instead. So the replicas listen on loopback only, as every
// test process here does. One slice per replica, since replicas differ by port and a slice
// has one port list. The other ways: a TCP round-robin proxy of our own (a cost in the bench
// process that no cluster has, and per-connection spreading all the same), or the
// machine's own address (a listener on the network, which the harness never opens).
//
// What the egress hop costs (a CONNECT per new connection, then a byte pipe in the bench's
// process) is measured, not assumed: the bench runs one replica by URL too, straight from
// the API server (`url`), beside one replica through the Service (`svc-1`).
//
// The API server keeps a client per clientConfig, and a pool of kept-alive connections per
// client: marking a replica unready would not stop the connections already open to it. So
// each arm has its own Service port (`first-K`: the first K replicas, whose slices list that
// port), and an arm's routing change is a change of port, which is a new client with no
// connection to any replica outside the arm.

import { AdmissionregistrationV1Api, CoreV1Api, DiscoveryV1Api, type KubeConfig } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { WEBHOOK_CONFIG_NAME, WEBHOOK_NAMESPACE } from '../../projections/names.ts';
import { startWebhooks, type WebhookOptions, type WebhookProcess } from '../../localcluster/webhookproc.ts';

/** TEST-NET-2 (RFC 5737): a documentation address, never dialled (the egress proxy redirects it to 127.0.0.1). */
const ENDPOINT_IP = '198.51.100.1';
/** The Service the self-managed certificate names (webhook --service's default). */
const SERVICE = 'ownerrefs-webhook';
const MANAGED_BY = 'bench.ownerrefs.dev';
/** How long the API server's informer gets to see a new clientConfig (it takes milliseconds). */
const SETTLE_MS = 1_500;

/** Where the API server sends reviews: one replica by URL, or the first `service` replicas through the Service. */
export type Route = { url: number } | { service: number };

const portName = (k: number) => `first-${k}`;

export interface Replicas {
  readonly procs: readonly WebhookProcess[];
  route(r: Route): Promise<void>;
  stop(): Promise<void>;
}

const slice = (i: number) => `${SERVICE}-bench-${i}`;

export async function startReplicas(admin: KubeConfig, dir: string, n: number, opts: WebhookOptions): Promise<Replicas> {
  const core = admin.makeApiClient(CoreV1Api);
  const discovery = admin.makeApiClient(DiscoveryV1Api);
  const reg = admin.makeApiClient(AdmissionregistrationV1Api);
  await core.deleteNamespacedService({ namespace: WEBHOOK_NAMESPACE, name: SERVICE }).catch(() => undefined);
  const ks = Array.from({ length: n }, (_, i) => i + 1);
  // No selector: its endpoints are ours (the EndpointSlice controller leaves such a Service alone).
  await core.createNamespacedService({ namespace: WEBHOOK_NAMESPACE, body: { metadata: { name: SERVICE },
    spec: { type: 'ClusterIP', ports: ks.map((k) => ({ name: portName(k), port: 8440 + k, targetPort: 9443, protocol: 'TCP' })) } } });
  const service = (k: number) => ({ service: { name: SERVICE, namespace: WEBHOOK_NAMESPACE, path: '/mutate', port: 8440 + k } });
  const procs = await startWebhooks(admin, dir, { ...opts, replicas: n, clientConfig: () => service(n) });
  // Replica i serves the arms of the first K replicas for every K > i.
  for (let i = 0; i < n; i++) {
    await discovery.createNamespacedEndpointSlice({ namespace: WEBHOOK_NAMESPACE, body: {
      metadata: { name: slice(i), labels: { 'kubernetes.io/service-name': SERVICE, 'endpointslice.kubernetes.io/managed-by': MANAGED_BY } },
      addressType: 'IPv4', endpoints: [{ addresses: [ENDPOINT_IP], conditions: { ready: true } }],
      ports: ks.filter((k) => k > i).map((k) => ({ name: portName(k), port: procs[i]!.port, protocol: 'TCP' })),
    } });
  }
  let current = '';
  return {
    procs,
    async route(r) {
      const key = JSON.stringify(r);
      if (key === current) return;
      const clientConfig = 'url' in r ? { url: `https://127.0.0.1:${procs[r.url]!.port}/mutate` } : service(r.service);
      // The replicas keep caBundle current: keep theirs, change only where it points.
      for (let attempt = 0; ; attempt++) {
        const cfg = await reg.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIG_NAME });
        for (const w of cfg.webhooks ?? []) w.clientConfig = { ...clientConfig, caBundle: w.clientConfig.caBundle };
        try {
          await reg.replaceMutatingWebhookConfiguration({ name: WEBHOOK_CONFIG_NAME, body: cfg });
          break;
        } catch (err) {
          if ((err as { code?: number }).code !== 409 || attempt > 5) throw err;
        }
      }
      current = key;
      await sleep(SETTLE_MS);
    },
    async stop() {
      await Promise.all(procs.map((p) => p.stop()));
      await reg.deleteMutatingWebhookConfiguration({ name: WEBHOOK_CONFIG_NAME }).catch(() => undefined);
    },
  };
}
