// npm run release's first step: one version everywhere, or it stops before building anything
// and names the file that differs (scripts/release.sh --check-version).

import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/docblocks.ts';
import { tmpDir } from '../support/tmpdir.ts';

const FILES = ['package.json', 'CHANGELOG.md', 'scripts/release.sh', 'charts/ownerrefs-agent/Chart.yaml', 'charts/ownerrefs-agent/values.yaml', 'daemonset.yaml', 'webhook.yaml', 'admission-policy.yaml', 'kubectl-plugin/ownerrefs.krew.yaml'];
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** A copy of the files the check reads, `edit` applied to one of them; the check's exit code and stderr. */
function check(edit?: { file: string; from: string; to: string }): { status: number | null; stderr: string } {
  const dir = tmpDir('release-');
  for (const f of FILES) {
    mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    cpSync(path.join(ROOT, f), path.join(dir, f));
  }
  if (edit) {
    const file = path.join(dir, edit.file);
    const text = readFileSync(file, 'utf8');
    expect(text).toContain(edit.from);
    writeFileSync(file, text.replace(edit.from, edit.to));
  }
  const r = spawnSync('bash', [path.join(dir, 'scripts', 'release.sh'), '--check-version'], { cwd: dir, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

describe('release: one version, and the architectures it builds', () => {
  it('passes on the tree as it is', () => {
    expect(check()).toEqual({ status: 0, stderr: `[release] version ${VERSION}\n` });
  });

  it.each([
    ['charts/ownerrefs-agent/Chart.yaml', `version: ${VERSION}`, 'version: 9.9.9', 'version'],
    ['charts/ownerrefs-agent/Chart.yaml', `appVersion: "${VERSION}"`, 'appVersion: "9.9.9"', 'appVersion'],
    ['charts/ownerrefs-agent/values.yaml', `tag: "${VERSION}"`, 'tag: "9.9.9"', 'image.tag'],
    ['daemonset.yaml', `ownerrefs-agent:${VERSION}`, 'ownerrefs-agent:9.9.9', 'image ghcr.io/ownerrefs-dev/ownerrefs-agent:9.9.9'],
    ['webhook.yaml', `ownerrefs-agent:${VERSION}`, 'ownerrefs-agent:9.9.9', 'image ghcr.io/ownerrefs-dev/ownerrefs-agent:9.9.9'],
    ['admission-policy.yaml', `ownerrefs-agent:${VERSION}`, 'ownerrefs-agent:9.9.9', 'image ghcr.io/ownerrefs-dev/ownerrefs-agent:9.9.9'],
    ['kubectl-plugin/ownerrefs.krew.yaml', `version: v${VERSION}`, 'version: v9.9.9', 'spec.version'],
  ])('stops when %s differs (%s)', (file, from, to, what) => {
    const r = check({ file, from, to });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^release: ${file.replaceAll('.', '\\.')}: ${what.replaceAll('.', '\\.')} is '9\\.9\\.9', not the release's version ${VERSION.replaceAll('.', '\\.')}`));
  });

  it('stops when the chart\'s default architectures are not the ones the release builds', () => {
    expect(check({ file: 'charts/ownerrefs-agent/values.yaml', from: 'architectures: [amd64, arm64]', to: 'architectures: [amd64]' }))
      .toMatchObject({ status: 1, stderr: expect.stringMatching(/^release: charts\/ownerrefs-agent\/values\.yaml: architectures is not \[amd64 arm64\]/) });
  });

  it('stops when CHANGELOG.md has no section for the version', () => {
    expect(check({ file: 'CHANGELOG.md', from: `## [${VERSION}] - `, to: '## [9.9.9] - ' }))
      .toMatchObject({ status: 1, stderr: expect.stringMatching(/^release: CHANGELOG\.md: no section '## \[[\d.]+\] - YYYY-MM-DD'/) });
  });

  it('stops on a version that is not MAJOR.MINOR.PATCH', () => {
    expect(check({ file: 'package.json', from: `"version": "${VERSION}"`, to: '"version": "latest"' })).toMatchObject({ status: 1, stderr: expect.stringMatching(/^release: package\.json's version latest is not MAJOR\.MINOR\.PATCH/) });
  });
});
