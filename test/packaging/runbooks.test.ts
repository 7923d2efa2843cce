// RUNBOOKS.md's exemptions of the agent's ServiceAccount, for the webhooks that change every
// pod update and so make the agent's policy refuse its writes: each names the ServiceAccount
// that daemonset.yaml installs, in the form its engine reads. (test/e2e/coexistence.test.ts
// applies the matchConditions form to a real webhook on the real API server.)

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ROOT, yamlBlocks } from '../support/docblocks.ts';

const sa = parseAllDocuments(readFileSync(path.join(ROOT, 'daemonset.yaml'), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace: string } })
  .find((o) => o?.kind === 'ServiceAccount')!.metadata;
const username = `system:serviceaccount:${sa.namespace}:${sa.name}`;

describe('RUNBOOKS.md: exempting the agent in another mutating webhook', () => {
  const [plain, kyverno, gatekeeper] = yamlBlocks('docs/RUNBOOKS.md', 'OwnerRefsAnnotationWritesRefused') as Record<string, unknown>[];

  it('a webhook\'s matchConditions: one condition, false exactly for the agent\'s user', () => {
    expect(plain).toEqual({ matchConditions: [{ name: expect.stringMatching(/^[a-z0-9-]+$/), expression: `request.userInfo.username != '${username}'` }] });
  });

  it('Kyverno: an exclude of the agent\'s ServiceAccount, by name and namespace', () => {
    expect(kyverno).toEqual({ exclude: { any: [{ subjects: [{ kind: 'ServiceAccount', name: sa.name, namespace: sa.namespace }] }] } });
  });

  it('Gatekeeper: its chart\'s mutatingWebhookMatchConditions, the same condition', () => {
    expect(gatekeeper).toEqual({ mutatingWebhookMatchConditions: plain!.matchConditions });
  });
});
