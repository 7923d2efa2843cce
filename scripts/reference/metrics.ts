// docs/reference/metrics.md: every metric the agent and the webhook export, read from the
// registries the processes build (so name, type, labels and help are what /metrics says).
// The CSI counter is made where CSI mode starts: the driver is started on a scratch socket.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { RUN_FLAGS } from '../../agent/config.ts';
import { startCsi } from '../../agent/files/csi/start.ts';
import { AgentMetrics } from '../../agent/monitoring/metrics.ts';
import { WEBHOOK_FLAGS } from '../../agent/admission/webhook/config.ts';
import { webhookMetrics } from '../../agent/admission/webhook/command.ts';
import { gateMetrics } from '../../agent/admission/gate/command.ts';
import { GATE_FLAGS } from '../../agent/admission/gate/config.ts';
import { code, header, sentence, table } from './common.ts';

interface Row {
  name: string;
  type: string;
  labels: readonly string[];
  help: string;
  buckets?: readonly number[] | undefined;
}

/** What prom-client keeps on each metric beyond its typed MetricObject. */
type Described = { name: string; type: string; help: string; labelNames?: readonly string[]; upperBounds?: readonly number[] };

function rowsOf(registry: Registry): Row[] {
  return registry.getMetricsAsArray().map((m) => {
    const d = m as unknown as Described;
    return { name: d.name, type: String(d.type), labels: d.labelNames ?? [], help: d.help, buckets: d.upperBounds };
  });
}

/** The families prom-client's default metrics add (process_*, nodejs_*), under the registry's prefix. */
function defaultFamilies(all: Registry, own: Registry): string[] {
  const mine = new Set(own.getMetricsAsArray().map((m) => m.name));
  const added = all.getMetricsAsArray().map((m) => m.name).filter((n) => !mine.has(n));
  if (added.length === 0) throw new Error('scripts/reference: no default process metrics found');
  return [...new Set(added.map((n) => n.replace(/^((?:[a-z]+_)*?(?:process|nodejs)_).*$/, '$1*')))].sort();
}

/** The CSI driver's metrics, made by starting it on a scratch socket with nothing behind it. */
async function csiRows(): Promise<Row[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ownerrefs-reference-'));
  const registry = new Registry();
  try {
    const csi = await startCsi({
      socket: path.join(dir, 'csi.sock'), registrationDir: undefined, kubeletRoot: dir, nodeName: 'reference',
      pods: { waitForPod: async () => false, upsert: () => {}, publish: async () => false, unpublish: async () => [], adopt: () => {} },
      client: { json: () => Promise.reject(new Error('no API server here')) },
      ready: () => false, log: pino({ level: 'silent' }), registry,
    });
    await csi.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rowsOf(registry).map((r) => ({ ...r, help: `CSI mode (--csi-socket) only. ${r.help}` }));
}

function metricTable(rows: readonly Row[], defaults: readonly string[]): string {
  const body = rows.map((r) => [
    code(r.name), r.type, r.labels.map(code).join(', '),
    r.buckets ? `${sentence(r.help)} Buckets (upper bounds): ${r.buckets.join(', ')}.` : sentence(r.help),
  ]);
  body.push([defaults.map(code).join(', '), '', '', 'prom-client\'s process and Node.js runtime metrics (CPU, memory, file descriptors, event loop lag, garbage collection).']);
  return table(['Metric', 'Type', 'Labels', 'Meaning'], body);
}

export async function metricsPage(): Promise<string> {
  const agentOwn = new AgentMetrics({ processMetrics: false }).registry;
  const agent = [...rowsOf(agentOwn), ...await csiRows()];
  const agentDefaults = defaultFamilies(new AgentMetrics().registry, agentOwn);
  const webhookOwn = webhookMetrics(() => 0, { processMetrics: false }).registry;
  const webhookDefaults = defaultFamilies(webhookMetrics(() => 0).registry, webhookOwn);
  const gateOwn = gateMetrics(() => 0, { processMetrics: false }).registry;
  const gateDefaults = defaultFamilies(gateMetrics(() => 0).registry, gateOwn);
  return `${header(['agent/monitoring/metrics.ts', 'agent/files/csi/start.ts', 'agent/admission/webhook/command.ts', 'agent/admission/gate/command.ts'])}
# Metrics

Each process serves Prometheus' text format at \`/metrics\`, on the plain-HTTP port that also
serves \`/healthz\` and \`/readyz\`: the agent on \`--health-addr\` (default
${code(RUN_FLAGS['health-addr'].def)}), the webhook on its own \`--health-addr\` (default
${code(WEBHOOK_FLAGS['health-addr'].def)}). The chart's \`monitoring.podMonitor.enabled\` scrapes
them all (the gate's lifter too, below), and \`monitoring.prometheusRule.enabled\` installs the alerting rules of
[\`charts/ownerrefs-agent/files/alerts.yaml\`](../../charts/ownerrefs-agent/files/alerts.yaml),
each with a runbook in [RUNBOOKS.md](../RUNBOOKS.md). The meaning of each metric is its
\`# HELP\` line.

## Agent (\`ownerrefs-agent run\`)

${metricTable(agent, agentDefaults)}

## Webhook (\`ownerrefs-agent webhook\`)

${metricTable(rowsOf(webhookOwn), webhookDefaults)}

## Gate's lifter (\`ownerrefs-agent gate\`, \`admission.mode=policy\`)

On its own \`--health-addr\` (default ${code(GATE_FLAGS['health-addr'].def)}).

${metricTable(rowsOf(gateOwn), gateDefaults)}
`;
}
