// The hosted release workflow: actionlint (a pinned Go module) finds nothing in it, and it
// runs the commands that the suite runs here (npm run release, scripts/publish.sh), so what
// it publishes is what test/e2e/release.test.ts installed.

import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../support/docblocks.ts';

const DIR = path.join(ROOT, '.github', 'workflows');
const actionlint = () => path.join(execFileSync('bash', [path.join(ROOT, 'localcluster', 'release', 'tools', 'build.sh'), 'actionlint'], { encoding: 'utf8' }).trim(), 'actionlint');

describe('the release workflow', () => {
  const workflow = parse(readFileSync(path.join(DIR, 'release.yaml'), 'utf8')) as { on: { push: { tags: string[] } }; jobs: Record<string, { steps: { run?: string }[]; permissions: Record<string, string> }> };

  it('passes actionlint, as every workflow does', () => {
    const r = spawnSync(actionlint(), readdirSync(DIR).map((f) => path.join(DIR, f)), { encoding: 'utf8', cwd: ROOT });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  }, 120_000);

  it('catches a broken workflow (actionlint reads it: an unknown expression)', () => {
    const r = spawnSync(actionlint(), ['-'], { input: 'on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.nonesuch }}\n', encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/nonesuch/);
  }, 120_000);

  it('runs on version tags, builds with npm run release and publishes with scripts/publish.sh, signing keyless', () => {
    expect(workflow.on.push.tags).toEqual(['v[0-9]+.[0-9]+.[0-9]+*']);
    const runs = Object.values(workflow.jobs).flatMap((j) => j.steps.map((s) => s.run ?? '')).join('\n');
    expect(runs).toMatch(/OWNERREFS_SIGN=keyless OWNERREFS_IMAGE_REPOSITORY="\$IMAGE" npm run release/);
    // The provenance names the run: GitHub's variables reach it through sudo.
    expect(runs).toMatch(/--preserve-env=[^ ]*GITHUB_WORKFLOW_REF,GITHUB_RUN_ID/);
    expect(runs).toMatch(/bash scripts\/publish\.sh$/m);
    expect(workflow.jobs.release!.permissions).toEqual({ contents: 'write', packages: 'write', 'id-token': 'write' });
  });
});

describe('every workflow', () => {
  const files = readdirSync(DIR).map((f) => path.join(DIR, f));
  const uses = files.flatMap((f) => readFileSync(f, 'utf8').split('\n').filter((l) => /^\s*-?\s*uses:/.test(l)).map((l) => ({ file: path.basename(f), line: l.trim() })));

  it('pins each action by its full commit, with the version it is beside it (a tag can be moved, a commit cannot)', () => {
    expect(uses.length).toBeGreaterThan(2);
    expect(uses.filter((u) => !/^-?\s*uses: [\w.-]+\/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$/.test(u.line))).toEqual([]);
  });

  it('runs the README\'s test command on every push to main and every pull request, as root', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const command = /^(npm ci && npm test)\s+#/m.exec(readme)![1]!;
    const ci = parse(readFileSync(path.join(DIR, 'ci.yaml'), 'utf8')) as { on: { push: { branches: string[] }; pull_request: unknown }; permissions: unknown; jobs: Record<string, { steps: { run?: string }[] }> };
    expect(ci.on.push.branches).toEqual(['main']);
    expect('pull_request' in ci.on).toBe(true);
    expect(ci.permissions).toEqual({ contents: 'read' });
    const runs = Object.values(ci.jobs).flatMap((j) => j.steps.map((x) => x.run ?? ''));
    expect(runs.filter((r) => r.startsWith('sudo ') && r.endsWith(`bash -c '${command}'`))).toHaveLength(1);
  });
});
