// The alert rules, with Prometheus' own promtool (built from Go modules, cached): valid,
// unit-tested against series shaped like the agent's /metrics, installed by the chart as
// written, and naming only metrics that exist.

import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { AgentMetrics } from '../../agent/monitoring/metrics.ts';
import { CHART, helmTemplate, toolsDir } from '../../scripts/gen-manifests.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const RULES = path.join(CHART, 'files', 'alerts.yaml');
type Rule = { alert: string; expr: string; annotations: Record<string, string> };
const rules = (parseYaml(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
let tools: string;

beforeAll(() => { tools = toolsDir(); }, 900_000);

describe('the alert rules', () => {
  it('pass promtool check rules', () => {
    const r = spawnSync(path.join(tools, 'promtool'), ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('pass promtool test rules (every alert fires where it should, and only there)', () => {
    const r = spawnSync(path.join(tools, 'promtool'), ['test', 'rules', 'alerts.test.yaml'], { encoding: 'utf8', cwd: path.join(ROOT, 'test', 'monitoring') });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('each have a test and a runbook entry', () => {
    const tests = readFileSync(path.join(ROOT, 'test', 'monitoring', 'alerts.test.yaml'), 'utf8');
    const runbooks = readFileSync(path.join(ROOT, 'docs', 'RUNBOOKS.md'), 'utf8');
    for (const r of rules) {
      expect(tests, r.alert).toContain(`alertname: ${r.alert}`);
      expect(runbooks, r.alert).toContain(`## ${r.alert}\n`);
      expect(r.annotations.runbook_url).toBe(`https://github.com/ownerrefs-dev/ownerrefs-agent/blob/main/docs/RUNBOOKS.md#${r.alert.toLowerCase()}`);
    }
  });

  it('name only metrics the agent, the webhook or the gate exports (or the API server and kube-state-metrics do)', async () => {
    const agent = (await new AgentMetrics().registry.getMetricsAsJSON()).map((m) => m.name);
    const webhookTs = readFileSync(path.join(ROOT, 'agent', 'admission', 'webhook', 'command.ts'), 'utf8');
    const webhook = [...webhookTs.matchAll(/name: '(ownerrefs_webhook_[a-z_]+)'/g)].map((m) => m[1]!);
    const gateTs = readFileSync(path.join(ROOT, 'agent', 'admission', 'gate', 'command.ts'), 'utf8');
    const gate = [...gateTs.matchAll(/name: '(ownerrefs_gate_[a-z_]+)'/g)].map((m) => m[1]!);
    expect(gate).toContain('ownerrefs_gate_pods_gated');
    const known = new Set([...agent, ...webhook, ...gate]);
    const others = /^(up|apiserver_admission_webhook_[a-z_]+|kube_daemonset_[a-z_]+|kube_deployment_[a-z_]+)$/;
    for (const r of rules) {
      const bare = r.expr.replace(/\{[^}]*\}/g, '{}').replace(/\[[^\]]*\]/g, '[]').replace(/by \([^)]*\)/g, '');
      for (const [m] of bare.matchAll(/[a-z_][a-z0-9_]*(?=\{|\[|\s*[)>=<-]|$)/g)) {
        if (['sum', 'min', 'rate', 'increase', 'histogram_quantile', 'time'].includes(m)) continue;
        const base = m.replace(/_(bucket|sum|count)$/, '');
        expect(known.has(base) || others.test(m), `${r.alert}: ${m}`).toBe(true);
      }
    }
  });

  it('are what the chart installs, as a PrometheusRule', () => {
    const out = helmTemplate(path.join(tools, 'helm'), ['--set', 'monitoring.prometheusRule.enabled=true', '--set', 'monitoring.podMonitor.enabled=true', '--show-only', 'templates/monitoring.yaml']);
    const objs = parseAllDocuments(out).map((d) => d.toJS() as Record<string, any>).filter(Boolean); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(objs.map((o) => o.kind)).toEqual(['PodMonitor', 'PrometheusRule']);
    expect(objs[1]!.spec).toEqual(parseYaml(readFileSync(RULES, 'utf8')));
    expect(execFileSync(path.join(tools, 'helm'), ['lint', '--strict', CHART, '--set', 'monitoring.prometheusRule.enabled=true']).toString()).toMatch(/0 chart\(s\) failed/);
  });
});
