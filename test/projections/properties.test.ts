// Property-based tests: for arbitrary owner strings the renderers stay faithful.
import fc from 'fast-check';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveVolumes } from '../../agent/files/volume/resolve.ts';
import { FILES, project, type OwnerReference } from '../../projections/index.ts';
import { pod } from '../support/fixtures.ts';
import { sourceEnv } from '../support/shell.ts';

// Well-formed strings (lone surrogates are covered by the Go oracle tests: Go maps them to U+FFFD).
const text = fc.string({ unit: 'grapheme', maxLength: 40 });
const optBool = fc.option(fc.boolean(), { nil: undefined });
const ownerArb: fc.Arbitrary<OwnerReference> = fc.record({
  apiVersion: text, kind: text, name: text, uid: text, controller: optBool, blockOwnerDeletion: optBool,
});
const file = (owners: OwnerReference[], name: string) =>
  project(pod({ owners })).find((f) => f.path === name)!.bytes.toString('utf8');

describe('renderer properties', () => {
  it('ownerReferences parses back to exactly the input owners', () => {
    fc.assert(fc.property(fc.array(ownerArb, { maxLength: 5 }), (owners) => {
      const doc = JSON.parse(file(owners, FILES.ownerReferences)) as { items: OwnerReference[] };
      const strip = (o: OwnerReference) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
      expect(doc.items).toEqual(owners.map(strip));
    }));
  });

  it('the env file round-trips through /bin/sh to the exact JSON', () => {
    fc.assert(fc.property(fc.array(ownerArb, { maxLength: 2 }), (owners) => {
      expect(sourceEnv(file(owners, FILES.env))).toBe(file(owners, FILES.ownerReferences));
    }), { numRuns: 60 });
  });
});

describe('annotation parser properties', () => {
  const root = '/var/lib/kubelet';
  it('never yields a path outside the pod volume directory, whatever the annotation and uid', () => {
    const hostile = fc.constantFrom('..', '.', '/', '/etc', 'a/../b', '', ' ', '~', '\0', 'x'.repeat(64), '..%2f');
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
    const annotationArb = fc.array(fc.oneof(label, hostile, fc.string({ maxLength: 12 })), { minLength: 1, maxLength: 4 }).map((a) => a.join(','));
    const mirrorArb = fc.oneof(fc.uuid(), hostile, fc.string({ maxLength: 20 }));
    fc.assert(fc.property(annotationArb, mirrorArb, (annotation, mirror) => {
      const names = annotation.split(',').map((s) => s.trim());
      const p = pod({ annotation, annotations: { 'kubernetes.io/config.mirror': mirror }, volumes: names.map((name) => ({ name, emptyDir: {} })) });
      for (const v of resolveVolumes(p, root).volumes) {
        const full = path.resolve(v.target.root, ...v.target.components);
        const base = path.join(root, 'pods', mirror, 'volumes', 'kubernetes.io~empty-dir');
        expect(path.dirname(full)).toBe(base);
        expect(v.target.components.every((c) => c !== '..' && c !== '.' && !c.includes('/'))).toBe(true);
      }
    }), { numRuns: 2000 });
  });
});
