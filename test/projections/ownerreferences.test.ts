import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { FILES, project, type OwnerReference } from '../../projections/index.ts';
import { HOSTILE_STRINGS, KEP_OWNERS, owner, pod } from '../support/fixtures.ts';
import { buildOracle, goMarshal } from '../support/gooracle.ts';
import { sourceEnv } from '../support/shell.ts';

const text = (files: ReturnType<typeof project>, name: string) => files.find((f) => f.path === name)?.bytes.toString('utf8');

beforeAll(() => buildOracle(), 120_000);

describe('ownerReferences file', () => {
  const cases: { name: string; owners: OwnerReference[] | null }[] = [
    { name: "the KEP's two-owner example", owners: KEP_OWNERS },
    { name: 'no ownerReferences field', owners: null },
    { name: 'an empty ownerReferences list', owners: [] },
    { name: 'controller false (present) is written', owners: [owner({ controller: false, blockOwnerDeletion: false })] },
    { name: 'controller and blockOwnerDeletion absent are omitted', owners: [owner({ controller: undefined, blockOwnerDeletion: undefined })] },
    { name: 'only blockOwnerDeletion present', owners: [owner({ controller: undefined })] },
    ...HOSTILE_STRINGS.map((s) => ({ name: `hostile string ${JSON.stringify(s)}`, owners: [owner({ name: s, kind: s, apiVersion: s, uid: s })] })),
  ];

  it.each(cases)('matches Go encoding/json byte for byte: $name', ({ owners }) => {
    const got = text(project(pod({ owners })), FILES.ownerReferences);
    expect(got).toBe(goMarshal(owners ?? []));
  });

  it('writes the exact bytes for the KEP example', () => {
    expect(text(project(pod({ owners: KEP_OWNERS })), FILES.ownerReferences)).toBe(
      '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[' +
        '{"apiVersion":"apps/v1","kind":"DaemonSet","name":"an-owned-pod-1722852739","uid":"6be1683f-da9c-4f68-9440-82376231cfa6","controller":true,"blockOwnerDeletion":true},' +
        '{"apiVersion":"apps/v1","kind":"Some-CRD","name":"an-owned-pod-1722852739","uid":"6be1683f-da9c-4f68-9440-82376231cfa6","controller":true,"blockOwnerDeletion":true}]}',
    );
  });

  it('writes "items":[] (never null, never empty) when there are no owners', () => {
    expect(text(project(pod({ owners: null })), FILES.ownerReferences)).toBe('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}');
  });

  it('escapes HTML characters and line separators as Go does', () => {
    const got = text(project(pod({ owners: [owner({ name: '<a>&\u2028\u2029' })] })), FILES.ownerReferences);
    expect(got).toContain('"name":"\\u003ca\\u003e\\u0026\\u2028\\u2029"');
  });
});

describe('dependentOwnerReferences file', () => {
  it('drops controller and blockOwnerDeletion and keeps identity fields in order', () => {
    const got = text(project(pod({ owners: KEP_OWNERS })), FILES.dependents);
    expect(got).toBe(
      '[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"an-owned-pod-1722852739","uid":"6be1683f-da9c-4f68-9440-82376231cfa6"},' +
        '{"apiVersion":"apps/v1","kind":"Some-CRD","name":"an-owned-pod-1722852739","uid":"6be1683f-da9c-4f68-9440-82376231cfa6"}]',
    );
  });

  it('is [] when the pod has no owners', () => {
    expect(text(project(pod({ owners: null })), FILES.dependents)).toBe('[]');
  });

  it('parses back to the owners without the two flags', () => {
    const owners = HOSTILE_STRINGS.filter((s) => !s.includes('\ud800')).map((s) => owner({ name: s }));
    const parsed = JSON.parse(text(project(pod({ owners })), FILES.dependents)!) as OwnerReference[];
    expect(parsed).toEqual(owners.map(({ apiVersion, kind, name, uid }) => ({ apiVersion, kind, name, uid })));
  });
});

describe('ownerReferences.env file', () => {
  const sourced = (env: string): string => sourceEnv(env);

  it.each([...HOSTILE_STRINGS.map((s) => ({ s })), { s: "''''" }, { s: "'\\''" }])(
    'sourced by /bin/sh yields exactly the JSON for owner name $s',
    ({ s }) => {
      const files = project(pod({ owners: [owner({ name: s, kind: s })] }));
      const env = text(files, FILES.env)!;
      expect(env.endsWith('\n')).toBe(true);
      expect(env.split('\n')).toHaveLength(2); // one line, then the final newline
      expect(sourced(env)).toBe(text(files, FILES.ownerReferences));
    },
  );

  it('never runs embedded commands', () => {
    const marker = `/tmp/ownerrefs-pwned-${process.pid}`;
    const files = project(pod({ owners: [owner({ name: `$(touch ${marker})\`touch ${marker}\`'; touch ${marker}; '` })] }));
    sourced(text(files, FILES.env)!);
    expect(() => execFileSync('test', ['-e', marker])).toThrow();
  });
});

describe('project()', () => {
  it('renders the three files 0644, ownerReferences last so apps waiting for it find the others', () => {
    expect(project(pod()).map((f) => [f.path, f.mode])).toEqual([
      ['ownerReferences.env', 0o644], ['dependentOwnerReferences', 0o644], ['ownerReferences', 0o644],
    ]);
  });

  it.each([
    { envFile: false, dependentsFile: true, files: ['dependentOwnerReferences', 'ownerReferences'] },
    { envFile: true, dependentsFile: false, files: ['ownerReferences.env', 'ownerReferences'] },
    { envFile: false, dependentsFile: false, files: ['ownerReferences'] },
  ])('leaves out files turned off (env $envFile, dependents $dependentsFile)', ({ files, ...opts }) => {
    expect(project(pod(), { ...opts, nodeFile: true, followOwners: false }).map((f) => f.path)).toEqual(files);
  });
});
