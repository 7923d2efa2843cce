// Regenerates the MutatingWebhookConfiguration at the end of webhook.yaml from
// agent/manifests/webhookconfig.ts (test/packaging/webhook-manifest.test.ts fails when they differ):
//   node scripts/gen-webhook-config.ts
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { webhookConfiguration } from '../agent/manifests/webhookconfig.ts';
import { MUTATE_PATH, WEBHOOK_NAMESPACE } from '../projections/names.ts';

export const MARKER = '# Generated from agent/manifests/webhookconfig.ts';
const file = path.join(import.meta.dirname, '..', 'webhook.yaml');

export function generated(): string {
  const cfg = webhookConfiguration({ service: { name: 'ownerrefs-webhook', namespace: WEBHOOK_NAMESPACE, path: MUTATE_PATH, port: 443 } });
  return stringify(cfg, { lineWidth: 0, aliasDuplicateObjects: false });
}

if (import.meta.main) {
  const text = readFileSync(file, 'utf8');
  const at = text.indexOf(MARKER);
  if (at < 0) throw new Error(`webhook.yaml lacks the line "${MARKER}"`);
  const rest = text.slice(at);
  const header = rest.slice(0, rest.search(/^apiVersion:/m));
  writeFileSync(file, text.slice(0, at) + header + generated());
}
