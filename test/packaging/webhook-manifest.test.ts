import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { generated, MARKER } from '../../scripts/gen-webhook-config.ts';

const text = readFileSync(path.join(import.meta.dirname, '..', '..', 'webhook.yaml'), 'utf8');
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const objs = parseAllDocuments(text).map((d) => d.toJS() as Obj).filter(Boolean);
const byKind = (kind: string) => objs.find((o) => o.kind === kind)!;

describe('webhook.yaml', () => {
  it('ends with the configuration agent/manifests/webhookconfig.ts builds (regenerate: node scripts/gen-webhook-config.ts)', () => {
    expect(text.slice(text.indexOf(MARKER)).replace(/^#.*\n/gm, '')).toBe(generated());
  });

  it('runs two replicas behind a PodDisruptionBudget and a Service on the webhook port', () => {
    const d = byKind('Deployment');
    expect(d.spec.replicas).toBe(2);
    expect(byKind('PodDisruptionBudget').spec).toEqual({ minAvailable: 1, selector: d.spec.selector });
    expect(byKind('Service').spec.ports).toEqual([{ name: 'https', port: 443, targetPort: 'https' }]);
    expect(d.spec.template.spec.containers[0].args).toEqual(['webhook', '--listen=:9443', '--health-addr=:8081']);
  });

  it('fails closed only for what it matches, never waits long, and skips its own namespace', () => {
    for (const w of byKind('MutatingWebhookConfiguration').webhooks) {
      expect(w).toMatchObject({ failurePolicy: 'Fail', sideEffects: 'None', timeoutSeconds: 5, reinvocationPolicy: 'IfNeeded' });
      expect(w.matchConditions).toHaveLength(1);
      expect(w.namespaceSelector.matchExpressions).toEqual([{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['ownerrefs-system'] }]);
      expect(w.clientConfig.service).toEqual({ name: 'ownerrefs-webhook', namespace: 'ownerrefs-system', path: '/mutate', port: 443 });
    }
  });

  it('grants its own Secret and its own configuration by name, nothing else', () => {
    expect(byKind('Role').rules).toEqual([
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['ownerrefs-webhook-tls'], verbs: ['get', 'update'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    ]);
    expect(byKind('ClusterRole').rules).toEqual([
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: ['ownerrefs.dev'], verbs: ['get', 'patch'] },
    ]);
  });
});
