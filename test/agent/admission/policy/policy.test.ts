// The admission policies' structure, held to the tables they are built from, and the CEL
// escaping held to Go's. What the API server makes of them runs in
// test/e2e/admission-policy.test.ts, against the real one.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { celLiteral, GO_ESCAPES } from '../../../../agent/admission/policy/celjson.ts';
import { admissionPolicies, policyName } from '../../../../agent/admission/policy/policy.ts';
import { MATCH } from '../../../../agent/manifests/webhookconfig.ts';
import { REWRITTEN_FIELDS } from '../../../../projections/annotations.ts';
import { goString } from '../../../../projections/gojson.ts';
import { annotationField } from '../../../../projections/names.ts';
import { WORKLOAD_KINDS } from '../../../../projections/workloadkinds.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const objects = admissionPolicies() as Obj[];
const policies = objects.filter((o) => o.kind === 'MutatingAdmissionPolicy');
const hooks = [...new Set(WORKLOAD_KINDS.map((w) => w.webhook))];

describe('the admission policies', () => {
  it('one policy and one binding to it per webhook of the configuration, in its order', () => {
    expect(objects.map((o) => `${o.kind} ${o.metadata.name}`)).toEqual(hooks.flatMap((h) =>
      [`MutatingAdmissionPolicy ${policyName(h)}`, `MutatingAdmissionPolicyBinding ${policyName(h)}`]));
    for (const b of objects.filter((o) => o.kind === 'MutatingAdmissionPolicyBinding')) expect(b.spec).toEqual({ policyName: b.metadata.name });
  });

  it.each(hooks)('%s: the kinds of the table, matched by the webhook\'s own condition, failing closed, run once', (hook) => {
    const p = policies.find((o) => o.metadata.name === policyName(hook))!;
    const resources = p.spec.matchConstraints.resourceRules.flatMap((r: Obj) => r.resources);
    expect(resources).toEqual(WORKLOAD_KINDS.filter((w) => w.webhook === hook).map((w) => w.resource));
    const operations = [...new Set(p.spec.matchConstraints.resourceRules.flatMap((r: Obj) => r.operations))];
    // A Pod's annotations are set only at its creation; a template is rewritten whenever it changes.
    expect(operations).toEqual(hook === 'pods' ? ['CREATE'] : ['CREATE', 'UPDATE']);
    expect(p.spec.matchConditions).toEqual([{ name: 'uses-kep-4753-syntax', expression: MATCH[hook] }]);
    expect(p.spec).toMatchObject({ failurePolicy: 'Fail', reinvocationPolicy: 'Never' });
    const podSpec = WORKLOAD_KINDS.find((w) => w.webhook === hook)!.podSpec;
    expect(p.spec.variables.find((v: Obj) => v.name === 'fieldRefs').expression).toContain(`object.${podSpec.join('.')}.?containers`);
  });

  it('rewrites exactly the field paths the webhook rewrites, to the same annotation paths', () => {
    for (const p of policies) {
      const map = p.spec.variables.find((v: Obj) => v.name === 'rewrite').expression as string;
      for (const [from, key] of Object.entries(REWRITTEN_FIELDS)) expect(map).toContain(`${celLiteral(from)}: ${celLiteral(annotationField(key))}`);
      expect(map.match(/: /g)).toHaveLength(Object.keys(REWRITTEN_FIELDS).length);
    }
  });

  it('sets annotations only on Pods', () => {
    for (const p of policies) expect(p.spec.mutations[0].jsonPatch.expression.includes('annotationOps')).toBe(p.metadata.name === policyName('pods'));
  });
});

describe('the CEL that writes JSON as Go does', () => {
  // The replace() chain the policy runs, run here with the same table.
  const escaped = (s: string) => '"' + GO_ESCAPES.reduce((e, [from, to]) => e.replaceAll(from, to), s) + '"';

  it.each([
    ['plain', 'web-7d4b9'],
    ['quotes and backslashes', 'a"b\\c'],
    ['controls, with Go\'s short forms', '\u0000\u0001\b\f\n\r\t\u001f'],
    ['HTML characters', '<a>&b'],
    ['line and paragraph separators', 'x\u2028y\u2029z'],
    ['astral characters', 'crab 🦀'],
  ])('escapes %s as encoding/json does', (_what, s) => {
    expect(escaped(s)).toBe(goString(s));
  });

  it('escapes any well-formed string as encoding/json does', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => escaped(s) === goString(s)));
  });

  it.each([
    ['a quote and a backslash', "it's \\", "'it\\'s \\\\'"],
    ['controls, as CEL\'s \\u escapes', 'a\nb\u0001', "'a\\u000ab\\u0001'"],
    ['separators', '\u2028', "'\\u2028'"],
  ])('writes %s in a CEL literal', (_what, s, literal) => {
    expect(celLiteral(s)).toBe(literal);
  });
});
