// The harness's differences from a cluster, applied to a chart's rendering (installed.ts
// says which and why). One function, used two ways: on `helm template` output by
// installed.ts, and as the command of the Helm post-renderer plugin that installed.ts
// writes for a real `helm install`, `upgrade` and `rollback` (run by node: reads the
// manifests on stdin, writes them patched on stdout; the harness in OWNERREFS_HARNESS).

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Harness {
  /** The API server, as the host reaches it (the agent uses the host's network). */
  server: string;
  /** The agent's health port on the host network. */
  agentPort: number;
  /** What a pod on the node's bridge (a webhook or gate replica) needs to reach the API server. */
  pods?: { hostAliases: Obj[]; env: Obj[] };
}

/** Patches the chart's objects in place for the harness, and returns them. */
export function patchForHarness(objs: Obj[], h: Harness): Obj[] {
  const api = new URL(h.server);
  for (const o of objs) {
    const spec = o.spec?.template?.spec;
    if (o.kind === 'DaemonSet' && o.metadata.name === 'ownerrefs-agent') {
      spec.hostNetwork = true;
      spec.dnsPolicy = 'ClusterFirstWithHostNet';
      const c = spec.containers[0];
      c.env.push({ name: 'KUBERNETES_SERVICE_HOST', value: api.hostname }, { name: 'KUBERNETES_SERVICE_PORT', value: api.port });
      c.args = c.args.map((a: string) => (a.startsWith('--health-addr=') ? `--health-addr=0.0.0.0:${h.agentPort}` : a));
      c.ports = [{ name: 'http-health', containerPort: h.agentPort, protocol: 'TCP' }];
    } else if (o.kind === 'Deployment' && ['ownerrefs-webhook', 'ownerrefs-gate'].includes(o.metadata.name) && h.pods) {
      spec.hostAliases = h.pods.hostAliases;
      for (const c of spec.containers) c.env = [...c.env ?? [], ...h.pods.env];
    }
  }
  return objs;
}

export function parseManifests(yaml: string): Obj[] {
  return parseAllDocuments(yaml).map((d) => d.toJS() as Obj).filter(Boolean);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const objs = patchForHarness(parseManifests(readFileSync(0, 'utf8')), JSON.parse(process.env.OWNERREFS_HARNESS!) as Harness);
  process.stdout.write(objs.map((o) => `---\n${stringify(o)}`).join(''));
}
