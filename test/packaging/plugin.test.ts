// The kubectl plugin as it ships: one bash file, its krew manifest naming the archive
// scripts/package-plugin.sh makes of it (byte for byte the same each time), and the parts of
// it that need no cluster. test/e2e/daemonset.test.ts runs it against a real cluster.

import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

import { tmpDir } from '../support/tmpdir.ts';
import { ANNOTATION_KEYS } from '../../projections/names.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const PLUGIN = path.join(ROOT, 'kubectl-plugin', 'kubectl-ownerrefs');

describe('kubectl ownerrefs', () => {
  it("krew's manifest names the archive of this very file (bash scripts/package-plugin.sh)", () => {
    const a = execFileSync('bash', [path.join(ROOT, 'scripts', 'package-plugin.sh'), path.join(tmpDir(), 'a.tar.gz')]).toString().trim();
    const b = execFileSync('bash', [path.join(ROOT, 'scripts', 'package-plugin.sh'), path.join(tmpDir(), 'b.tar.gz')]).toString().trim();
    expect(a).toBe(b);
    const manifest = parse(readFileSync(path.join(ROOT, 'kubectl-plugin', 'ownerrefs.krew.yaml'), 'utf8')) as { spec: { platforms: { sha256: string; bin: string }[] } };
    expect(manifest.spec.platforms.map((p) => p.sha256)).toEqual([a]);
    expect(manifest.spec.platforms[0]!.bin).toBe('kubectl-ownerrefs');
  });

  it('parses as bash, prints its usage, and refuses what it does not know in one line', () => {
    expect(spawnSync('bash', ['-n', PLUGIN]).status).toBe(0);
    const fakeKubectl = tmpDir();
    execFileSync('sh', ['-c', `printf '#!/bin/sh\\nexit 0\\n' > ${fakeKubectl}/kubectl && chmod +x ${fakeKubectl}/kubectl`]);
    const run = (...args: string[]) => spawnSync('bash', [PLUGIN, ...args], { encoding: 'utf8', env: { ...process.env, PATH: `${fakeKubectl}:${process.env.PATH}` } });
    expect(run('--help').stdout).toMatch(/^Usage: kubectl ownerrefs <command>/);
    expect(run('frobnicate')).toMatchObject({ status: 1, stderr: 'kubectl ownerrefs: unknown command frobnicate (kubectl ownerrefs --help)\n' });
    expect(run('doctor')).toMatchObject({ status: 1, stderr: 'kubectl ownerrefs: doctor needs --node NODE\n' });
  });

  it('looks for unkept pods by every annotation the agent keeps, not the owners\' alone', () => {
    const list = /^KEPT_ANNOTATIONS='([^']*)'$/m.exec(readFileSync(PLUGIN, 'utf8'))![1]!.split('|').map((k) => `ownerrefs.dev/${k}`);
    expect(list.sort()).toEqual([...ANNOTATION_KEYS].sort());
  });
});
