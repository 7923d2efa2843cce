import { describe, expect, it } from 'vitest';
import { WORKLOAD_KINDS, type WorkloadKind } from '../../projections/workloadkinds.ts';
import { webhookConfiguration } from '../../agent/manifests/webhookconfig.ts';
import { forbidReadingPolicy } from '../../agent/manifests/forbidpolicy.ts';
import { BUILTIN_KINDS } from '../../agent/owners/ownermeta.ts';
import { mutate } from '../../agent/admission/webhook/objects.ts';
import { isServed, SERVED_KINDS } from '../../agent/admission/webhook/review.ts';

type Rule = { apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[] };
type Obj = Record<string, unknown>;

/** An object of `w`'s kind whose pod spec (at the table's path) uses the KEP's syntax. */
function objectOf(w: WorkloadKind): Obj {
  const spec = { containers: [{ name: 'c', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] }] };
  const obj: Obj = { apiVersion: w.group ? `${w.group}/${w.version}` : w.version, kind: w.kind, metadata: { name: 'x', namespace: 'ns' } };
  let at = obj;
  w.podSpec.forEach((k, i) => {
    at[k] = i === w.podSpec.length - 1 ? spec : (at[k] as Obj | undefined) ?? {};
    at = at[k] as Obj;
  });
  return obj;
}

const ruled = (rules: Rule[], w: WorkloadKind, resource = w.resource) =>
  rules.some((r) => r.apiGroups.includes(w.group) && r.apiVersions.includes(w.version) && r.resources.includes(resource));

// Every consumer is derived from the one table: a row added, moved or mistyped shows up in each.
describe.each(WORKLOAD_KINDS.map((w) => [w.kind, w] as const))('the workload kind %s', (_kind, w) => {
  it('is a rule of the webhook that serves it, and of no other', () => {
    const hooks = (webhookConfiguration({ url: 'https://x' }).webhooks as { name: string; rules: Rule[] }[]);
    expect(hooks.filter((h) => ruled(h.rules, w)).map((h) => h.name)).toEqual([`${w.webhook}.ownerrefs.dev`]);
  });

  it('is rewritten by the webhook at the path the table gives', () => {
    expect(isServed({ group: w.group, version: w.version, kind: w.kind })).toBe(true);
    expect(SERVED_KINDS).toContain(w.kind);
    const m = mutate(w.kind, objectOf(w));
    expect(m.allowed && m.patch.map((p) => p.path).filter((p) => !p.startsWith('/metadata'))).toEqual([`/${w.podSpec.join('/')}/containers/0/env/0/valueFrom/fieldRef/fieldPath`]);
  });

  it('is refused by the forbid policy, with its subresources', () => {
    const rules = ((forbidReadingPolicy()[0] as { spec: { matchConstraints: { resourceRules: Rule[] } } }).spec.matchConstraints.resourceRules);
    for (const r of [w.resource, ...w.specSubresources.map((s) => `${w.resource}/${s}`)]) expect(ruled(rules, w, r)).toBe(true);
  });

  it(`is ${w.owner ? '' : 'not '}followed by the owner reader by default`, () => {
    expect(BUILTIN_KINDS.some((k) => k.kind === w.kind && k.group === w.group && k.resource === w.resource)).toBe(w.owner);
  });
});

describe('the workload kinds', () => {
  it('name each kind once, and nothing else is served', () => {
    expect(new Set(WORKLOAD_KINDS.map((w) => w.kind)).size).toBe(WORKLOAD_KINDS.length);
    expect(isServed({ group: 'apps', version: 'v1', kind: 'Pod' })).toBe(false);
    expect(isServed({ group: 'constructor', version: 'v1', kind: 'Pod' })).toBe(false);
    expect(mutate('constructor', {})).toEqual({ allowed: true, patch: [], changed: [], annotations: [], warnings: [] });
  });
});
