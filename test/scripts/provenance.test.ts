// The release's SLSA provenance: who built it (the hosted workflow or this machine), from which
// commit, and whether the checkout had changes the commit does not hold.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { builderOf, BUILD_TYPE, provenance, type BuildFacts } from '../../scripts/provenance.ts';

const facts = (over: Partial<BuildFacts> = {}): BuildFacts => ({
  version: '1.2.3', repository: 'ghcr.io/ownerrefs-dev/ownerrefs-agent', architectures: ['amd64', 'arm64'],
  commit: 'a'.repeat(40), dirty: false, lockSha256: 'b'.repeat(64), node: 'v24.1.0',
  builder: { id: 'urn:ownerrefs:builder:local:h' }, startedOn: '2026-01-01T00:00:00Z', finishedOn: '2026-01-01T00:10:00Z', ...over,
});

describe('builderOf', () => {
  it.each([
    { case: 'this machine, outside a workflow', env: {}, builder: { id: 'urn:ownerrefs:builder:local:host-1' } },
    {
      case: 'the hosted workflow, its run as the invocation',
      env: { GITHUB_WORKFLOW_REF: 'ownerrefs-dev/ownerrefs-agent/.github/workflows/release.yaml@refs/tags/v1.2.3', GITHUB_REPOSITORY: 'ownerrefs-dev/ownerrefs-agent', GITHUB_RUN_ID: '42', GITHUB_RUN_ATTEMPT: '2' },
      builder: { id: 'https://github.com/ownerrefs-dev/ownerrefs-agent/.github/workflows/release.yaml@refs/tags/v1.2.3', invocationId: 'https://github.com/ownerrefs-dev/ownerrefs-agent/actions/runs/42/attempts/2' },
    },
    {
      case: 'GitHub Enterprise: its own server',
      env: { GITHUB_SERVER_URL: 'https://ghe.example', GITHUB_WORKFLOW_REF: 'o/r/.github/workflows/release.yaml@refs/tags/v1' },
      builder: { id: 'https://ghe.example/o/r/.github/workflows/release.yaml@refs/tags/v1' },
    },
  ])('$case', ({ env, builder }) => {
    expect(builderOf(env, 'host-1')).toEqual(builder);
  });
});

describe('provenance', () => {
  it('pins the source to its commit and the npm packages to the lockfile, under the release\'s build type', () => {
    const p = provenance(facts());
    expect(p.buildDefinition.buildType).toBe(BUILD_TYPE);
    expect(p.buildDefinition.externalParameters).toEqual({
      source: { uri: 'git+https://github.com/ownerrefs-dev/ownerrefs-agent', digest: { gitCommit: 'a'.repeat(40) } },
      version: '1.2.3', repository: 'ghcr.io/ownerrefs-dev/ownerrefs-agent', architectures: ['amd64', 'arm64'],
    });
    expect(p.buildDefinition.resolvedDependencies).toContainEqual({ name: 'package-lock.json', digest: { sha256: 'b'.repeat(64) } });
    expect(p.buildDefinition.resolvedDependencies).toContainEqual({ uri: 'pkg:generic/node@24.1.0', name: 'node' });
    expect(p.runDetails).toEqual({ builder: { id: 'urn:ownerrefs:builder:local:h' }, metadata: { startedOn: '2026-01-01T00:00:00Z', finishedOn: '2026-01-01T00:10:00Z' } });
  });

  it.each([
    { case: 'a clean checkout', dirty: false },
    { case: 'changes not committed: the commit alone does not reproduce it', dirty: true },
  ])('says whether the checkout was dirty: $case', ({ dirty }) => {
    expect(provenance(facts({ dirty })).buildDefinition.internalParameters).toEqual({ dirty });
  });

  it('as a command, prints this checkout\'s commit and the lockfile\'s digest', () => {
    const root = path.join(import.meta.dirname, '..', '..');
    const out = JSON.parse(execFileSync(process.execPath, [path.join(root, 'scripts', 'provenance.ts'), '--version', '9.9.9', '--repository', 'r/x', '--arch', 'amd64', '--started', '2026-01-01T00:00:00Z'],
      { cwd: root, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: process.env.HOME } })) as ReturnType<typeof provenance>;
    expect(out.buildDefinition.externalParameters.source.digest.gitCommit).toBe(execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim());
    expect(out.buildDefinition.resolvedDependencies[1]!.digest!.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(out.runDetails.builder.id).toMatch(/^urn:ownerrefs:builder:local:/);
  });
});
