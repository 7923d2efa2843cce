// `ownerrefs-agent gate`: wiring only. A watch of the pods admission.mode=policy gated (every
// namespace, by GATED_LABEL), the owners' metadata for their workload values (the webhook's
// AdmissionChains), the lifter (lifter.ts), health and metrics. Replicas need no election:
// each lift is one guarded PATCH, and a second replica's fails harmlessly.

import type { Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { GATED_LABEL } from '../../../projections/names.ts';
import { KubeApiClient } from '../../kube/client.ts';
import { ApiEventSink } from '../../kube/events.ts';
import { KubeCredentials } from '../../kube/kubeconfig.ts';
import { Reflector } from '../../kube/reflector.ts';
import { startHealthServer } from '../../monitoring/health.ts';
import { F } from '../../monitoring/logfields.ts';
import { AdmissionChains } from '../../owners/admissionchains.ts';
import type { GateConfig } from './config.ts';
import { GateLifter, type LiftResult, type WatchedPod } from './lifter.ts';

const RESULTS: readonly LiftResult[] = ['lifted', 'waiting', 'gone', 'conflict', 'failed'];

/** The gate's metrics on a registry of their own. docs/reference/metrics.md is generated from them. */
export function gateMetrics(gated: () => number, opts: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const runs = new Counter({ name: 'ownerrefs_gate_runs_total', help: 'Runs for a gated pod, by result (lifted; waiting: its workload not known yet, it stays gated; gone; conflict: the pod changed, run again; failed: the PATCH failed, retried)', labelNames: ['result'], registers: [registry] });
  for (const result of RESULTS) runs.inc({ result }, 0);
  const seconds = new Histogram({ name: 'ownerrefs_gate_lift_seconds', help: 'Time from a run\'s start to its gate lifted (the owner reads and the PATCH)', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5], registers: [registry] });
  const ownerReads = new Counter({ name: 'ownerrefs_gate_owner_reads_total', help: 'Metadata reads of gated pods\' owners, by kind and outcome (ok or the status code)', labelNames: ['kind', 'code'], registers: [registry] });
  new Gauge({ name: 'ownerrefs_gate_pods_gated', help: 'Pods gated now, waiting for their values', registers: [registry], collect() { this.set(gated()); } });
  return { registry, runs, seconds, ownerReads };
}

export interface RunningGate {
  healthPort: number;
  /** Unready from now on, still lifting (SIGTERM: main.ts waits the shutdown delay, then stops). */
  drain(): void;
  stop(): Promise<void>;
}

export async function startGate(cfg: GateConfig, log: Logger): Promise<RunningGate> {
  const client = new KubeApiClient(KubeCredentials.load(cfg.kubeconfig));
  let gated = () => 0;
  const { registry, runs, seconds, ownerReads } = gateMetrics(() => gated());
  const chains = new AdmissionChains({
    client, log, budgetMs: cfg.ownerBudgetMs, refreshMs: cfg.ownerRefreshMs, maxOwners: cfg.maxOwners, followKinds: cfg.followKinds,
    observe: (kind, code) => ownerReads.inc({ kind, code }),
  });
  const lifter = new GateLifter({
    client, log, events: new ApiEventSink({ client, node: cfg.instance, log }),
    chain: (ns, owners) => chains.resolve(ns, owners),
    observe: (result, s) => { runs.inc({ result }); if (s !== undefined) seconds.observe(s); },
  });
  gated = () => lifter.gated;
  const pods = new Reflector<WatchedPod>({
    resource: 'pods', path: `/api/v1/pods?labelSelector=${encodeURIComponent(GATED_LABEL)}`, client, handler: lifter,
    observer: { failed: (err, backoffMs) => log.warn({ [F.resource]: 'pods', [F.err]: err, [F.backoffMs]: backoffMs }, 'watch failed; retrying') },
  });
  let draining = false;
  const ac = new AbortController();
  const watching = pods.run(ac.signal);
  const health = await startHealthServer({ host: cfg.healthHost, port: cfg.healthPort, registry,
    ready: () => (draining ? ['shutting down'] : pods.synced ? [] : ['gated pods not listed yet']) });
  const healthPort = (health.address() as { port: number }).port;
  log.info({ healthPort }, 'gate lifting');
  return {
    healthPort,
    drain() {
      draining = true;
    },
    async stop() {
      ac.abort();
      await watching.catch(() => undefined);
      await lifter.stop();
      chains.close();
      client.close();
      await new Promise<void>((r) => health.close(() => r()));
    },
  };
}
