// Attack 5 and 6 (issue 5): property-based tests of the renderers and the annotation
// parser over hostile input - every UTF-16 code unit (lone surrogates, controls, NUL,
// U+2028/9), shell metacharacters, and arbitrary pod specs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectionError, type FailureReason } from '../../agent/common/errors.ts';
import { EMPTY_DIR_PLUGIN, MAX_VOLUMES_PER_POD, resolveVolumes } from '../../agent/files/volume/resolve.ts';
import { isSafeComponent } from '../../agent/files/volume/dirfd.ts';
import { FILES, project, type OwnerReference } from '../../projections/index.ts';
import { agentKit } from '../support/agentkit.ts';
import { pod } from '../support/fixtures.ts';
import { buildOracle, goMarshal } from '../support/gooracle.ts';
import { ANNOTATION_MIRROR } from '../../projections/names.ts';

beforeAll(() => buildOracle(), 120_000);

const SPECIALS = ["'", '"', '\\', '`', '$', '$(', '${', ')', '}', ';', '&', '|', '<', '>', '!', '*', '?', '~', '#', '\n', '\r', '\t',
  '\0', '\x01', '\x1b', '\x7f', '\u0085', '\u2028', '\u2029', '\ud800', '\udfff', '\ud83c', '\ufeff', '\ufffd', '🎉', 'é', '日'];
/** Any UTF-16 code unit (lone surrogates included), whole code points, and the strings above. */
const unit = fc.oneof(
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.constantFrom(...SPECIALS),
);
const hostile = fc.string({ unit, maxLength: 24 });
const optBool = fc.option(fc.boolean(), { nil: undefined });
const ownerArb: fc.Arbitrary<OwnerReference> = fc.record({
  apiVersion: hostile, kind: hostile, name: hostile, uid: hostile, controller: optBool, blockOwnerDeletion: optBool,
});
const RESOLUTION_REASONS: FailureReason[] = ['InvalidAnnotation', 'VolumeNotDeclared', 'UnsupportedVolumeType', 'InvalidMirrorUID', 'InvalidUID'];
const file = (owners: OwnerReference[], name: string) => project(pod({ owners })).find((f) => f.path === name)!.bytes.toString('utf8');

describe('renderers against Go encoding/json', () => {
  it('ownerReferences is byte for byte what Go marshals, for any UTF-16 input', () => {
    fc.assert(fc.property(fc.array(ownerArb, { maxLength: 4 }), (owners) => {
      expect(file(owners, FILES.ownerReferences)).toBe(goMarshal(owners));
    }), { numRuns: 250 });
  });

  it('every file is valid UTF-8 JSON holding the input (lone surrogates become U+FFFD, as in Go)', () => {
    fc.assert(fc.property(fc.array(ownerArb, { maxLength: 4 }), (owners) => {
      const well = owners.map((o) => ({ ...o, apiVersion: o.apiVersion.toWellFormed(), kind: o.kind.toWellFormed(), name: o.name.toWellFormed(), uid: o.uid.toWellFormed() }));
      for (const f of project(pod({ owners }))) expect(Buffer.from(f.bytes.toString('utf8'), 'utf8')).toEqual(f.bytes);
      const doc = JSON.parse(file(owners, FILES.ownerReferences)) as { items: OwnerReference[] };
      expect(doc.items.map((o) => [o.apiVersion, o.kind, o.name, o.uid])).toEqual(well.map((o) => [o.apiVersion, o.kind, o.name, o.uid]));
      const deps = JSON.parse(file(owners, FILES.dependents)) as OwnerReference[];
      expect(deps).toEqual(well.map(({ apiVersion, kind, name, uid }) => ({ apiVersion, kind, name, uid })));
    }), { numRuns: 1000 });
  });
});

describe('the env file, sourced by real shells', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sec-env-'));
  const marker = path.join(dir, 'pwned');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // Fragments that break out of naive quoting, each followed by a command that leaves a mark.
  const payload = fc.array(fc.oneof(
    fc.constantFrom("'", "'\\''", '"', '`', '$(', ')', '${', '}', ';', '&&', '||', '|', '\n', '\\', "\\'", '#', ' ', '\u2028'),
    fc.constant(`touch ${marker}`), hostile,
  ), { maxLength: 10 }).map((xs) => xs.join(''));
  const shells: [string, string[]][] = [['/bin/sh', []], ['bash', []], ['bash', ['--posix']]];

  for (const [shell, flags] of shells) {
    it(`${[shell, ...flags].join(' ')}: one line, yields exactly the JSON, runs nothing`, () => {
      fc.assert(fc.property(fc.array(fc.record({ name: payload, kind: payload }), { minLength: 1, maxLength: 2 }), (fields) => {
        const owners = fields.map((f) => ({ apiVersion: 'v1', uid: 'u', ...f }));
        const env = file(owners, FILES.env);
        expect(env.indexOf('\n')).toBe(env.length - 1);
        const f = path.join(dir, 'env');
        writeFileSync(f, env);
        const out = execFileSync(shell, [...flags, '-c', 'set -a; . "$1"; printf %s "$OWNER_REFERENCES"', 'sh', f], { cwd: dir }).toString('utf8');
        expect(out).toBe(file(owners, FILES.ownerReferences));
        expect(existsSync(marker)).toBe(false);
      }), { numRuns: 150 });
    });
  }
});

describe('annotation parser and path resolution', () => {
  const ROOT = '/var/lib/kubelet';
  const TYPES = ['emptyDir', 'hostPath', 'configMap', 'secret', 'projected', 'csi', 'downwardAPI', 'persistentVolumeClaim', 'ephemeral', null];
  const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?$/);
  const piece = fc.oneof(label, hostile, fc.constantFrom('..', '.', '/', '/etc', 'a/../b', '', ' ', '~', 'x'.repeat(64), '..%2f', EMPTY_DIR_PLUGIN));
  const volumeArb = fc.record({ name: fc.oneof({ weight: 3, arbitrary: label }, piece), type: fc.oneof({ weight: 3, arbitrary: fc.constant('emptyDir') }, fc.constantFrom(...TYPES)) })
    .map(({ name, type }) => (type ? { name, [type]: type === 'emptyDir' ? { medium: 'Memory' } : {} } : { name }));
  // The annotation mostly names declared volumes (so paths get built), mixed with hostile pieces.
  const podArb = fc.record({
    volumes: fc.array(volumeArb, { maxLength: 10 }),
    mirror: fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, fc.uuid(), piece, fc.stringMatching(/^[0-9a-f]{32}$/)),
    uid: fc.oneof({ weight: 3, arbitrary: fc.uuid() }, piece),
  }).chain((base) => fc.tuple(
    fc.array(fc.oneof({ weight: 4, arbitrary: base.volumes.length ? fc.constantFrom(...base.volumes.map((v) => v.name)) : label }, label, piece),
      { minLength: 1, maxLength: 9 }),
    fc.constantFrom(',', ', ', ' ,'),
  ).map(([names, sep]) => ({ ...base, annotation: names.join(sep) })));

  it('never throws, never resolves more than 8 volumes, and every path is a declared emptyDir of this pod', () => {
    const seen = { runs: 0, resolved: 0, refusedMirror: 0 };
    fc.assert(fc.property(podArb, ({ annotation, mirror, uid, volumes }) => {
      seen.runs++;
      const p = pod({ uid, annotation, annotations: mirror === undefined ? {} : { [ANNOTATION_MIRROR]: mirror }, volumes });
      const { volumes: resolved, errors } = resolveVolumes(p, ROOT);
      expect(resolved.length).toBeLessThanOrEqual(MAX_VOLUMES_PER_POD);
      const diskUid = mirror ?? uid;
      if (resolved.length > 0) seen.resolved++;
      if (errors.some((e) => e.reason === 'InvalidMirrorUID')) seen.refusedMirror++;
      for (const v of resolved) {
        expect(v.target.components).toEqual(['pods', diskUid, 'volumes', EMPTY_DIR_PLUGIN, v.name]);
        expect(v.target.components.every(isSafeComponent)).toBe(true);
        expect(v.name).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
        expect(volumes.find((d) => d.name === v.name)).toHaveProperty('emptyDir');
        const full = path.resolve(v.target.root, ...v.target.components);
        expect(path.dirname(full)).toBe(path.join(ROOT, 'pods', diskUid, 'volumes', EMPTY_DIR_PLUGIN));
        expect(path.relative(path.join(ROOT, 'pods'), full).split(path.sep)).toHaveLength(4);
      }
      for (const e of errors) {
        expect(e).toBeInstanceOf(ProjectionError);
        expect(RESOLUTION_REASONS).toContain(e.reason); // the author's to fix, never a write failure
        expect(e.message.length).toBeLessThan(600); // pod-controlled text is quoted bounded
      }
      // Opted in with nothing served: the pod author is told why.
      if (resolved.length === 0) expect(errors.length).toBeGreaterThan(0);
    }), { numRuns: 3000 });
    // The generator must reach the path-building code often, not only the refusals.
    expect(seen.resolved / seen.runs).toBeGreaterThan(0.25);
    expect(seen.refusedMirror / seen.runs).toBeGreaterThan(0.05);
  });

  it('a component the writer accepts always names a direct child of the directory', () => {
    fc.assert(fc.property(fc.oneof(hostile, piece, fc.string({ unit: 'binary' })), (c) => {
      if (!isSafeComponent(c)) return;
      expect(path.dirname(path.join('/base', c))).toBe('/base');
      expect(path.basename(path.join('/base', c))).toBe(c);
    }), { numRuns: 5000 });
  });

  it('a pod without the annotation costs nothing, whatever else it carries', async () => {
    // Through the reconciler, not just the parser: such a pod is not tracked, watched, written or reported.
    const kit = agentKit();
    let n = 0;
    fc.assert(fc.property(podArb, ({ mirror, uid, volumes }) => {
      const p = pod({ name: `p${n++}`, uid, annotation: undefined, annotations: mirror === undefined ? {} : { [ANNOTATION_MIRROR]: mirror }, volumes });
      kit.reconciler.upsert(p);
    }), { numRuns: 500 });
    await kit.reconciler.idle();
    expect(await kit.gauge('ownerrefs_pods_tracked')).toBe(0);
    expect(await kit.gauge('ownerrefs_volumes_tracked')).toBe(0);
    expect(await kit.writes()).toBe(0);
    expect(kit.events.sent).toEqual([]);
  });
});
