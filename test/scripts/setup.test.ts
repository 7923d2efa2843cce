// scripts/setup.sh, the set-up the README's two commands run first: what it asks apt-get
// for on a machine that lacks each tool, what it says where it cannot install, and Go.
// Tools are hidden by scripts/without.sh; apt-get and id are fakes that record their calls.

import { execFile } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../support/tmpdir.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');

interface Run { code: number; stderr: string; apt: string[] }

/** setup.sh `what` with `hidden` off PATH, as uid `uid`, and apt-get recording its arguments. */
function setup(what: string, opts: { hidden?: string[]; uid?: number; go?: string; force?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  const fake = tmpDir();
  const log = path.join(fake, 'apt.log');
  writeFileSync(log, '');
  const script = (name: string, body: string) => {
    writeFileSync(path.join(fake, name), `#!/bin/sh\n${body}\n`);
    chmodSync(path.join(fake, name), 0o755);
  };
  script('apt-get', `echo "$*" >> ${log}`);
  script('id', `echo ${opts.uid ?? 0}`);
  if (opts.go !== undefined) script('go', `echo ${opts.go}`);
  const hidden = ['apt-get', 'id', ...(opts.go !== undefined ? ['go'] : []), ...opts.hidden ?? []].join(',');
  return new Promise((resolve) => {
    execFile('bash', [path.join(ROOT, 'scripts', 'without.sh'), hidden, 'bash', '-c', 'PATH="$FAKE:$PATH" exec bash scripts/setup.sh "$WHAT"'], {
      cwd: ROOT, env: { ...process.env, FAKE: fake, WHAT: what, OWNERREFS_SETUP_FORCE: opts.force ? '1' : '', ...opts.env },
    }, (err, _stdout, stderr) => resolve({
      code: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr, apt: readFileSync(log, 'utf8').split('\n').filter((l) => l !== ''),
    }));
  });
}

const install = (pkgs: string[]) => ['update -qq', `install -y -qq --no-install-recommends ${pkgs.join(' ')}`];

// Each run ends with the cached builds: cache hits once `npm test`'s own set-up made them.
describe('scripts/setup.sh', { timeout: 300_000 }, () => {
  it.each([
    { what: 'test', hidden: [], apt: [] },
    { what: 'test', hidden: ['containerd', 'ctr', 'runc'], apt: install(['containerd', 'runc']) },
    { what: 'demo', hidden: ['busybox', 'gcc', 'podman'], apt: install(['busybox-static', 'gcc']) }, // the demo needs no podman
    { what: 'test', hidden: ['busybox', 'podman', 'debootstrap', 'ip', 'openssl'], apt: install(['openssl', 'iproute2', 'busybox-static', 'podman', 'debootstrap']) },
  ])('as root, $what with $hidden missing: apt-get installs exactly their packages', async ({ what, hidden, apt }) => {
    const r = await setup(what, { hidden });
    expect(r.code, r.stderr).toBe(0);
    expect(r.apt).toEqual(apt);
  });

  it('with the package check forced, asks apt-get for every package even when all are present', async () => {
    const r = await setup('test', { force: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.apt).toEqual(install(['openssl', 'containerd', 'runc', 'containernetworking-plugins', 'iproute2', 'busybox-static', 'gcc', 'libc6-dev', 'podman', 'debootstrap']));
  });

  it.each([
    { what: 'demo', fallback: 'the demo runs on the kubelet emulator' },
    { what: 'test', fallback: 'the real-node tests run on a hollow node and those needing a container or podman are skipped' },
  ])('not root: says in one line what it cannot install and what $what does instead, installs nothing, and goes on', async ({ what, fallback }) => {
    const r = await setup(what, { hidden: ['containerd', 'busybox'], uid: 1000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.apt).toEqual([]);
    expect(r.stderr.split('\n').filter((l) => l.startsWith('[setup]'))).toEqual([
      `[setup] cannot install containerd busybox-static (not root): ${fallback}; install them as root for a real node`,
    ]);
  });

  it('a test tool that fails to build beside the control plane stops set-up: exit 1, saying so after the other builds', async () => {
    // A cache root under a file: the tools' build cannot make its directory.
    const r = await setup('test', { env: { OWNERREFS_TOOLS_CACHE: '/dev/null/tools' } });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n').pop()).toBe('[setup] building the test tools failed (their log is above)');
  });

  it.each([
    { go: undefined, hidden: ['go'], found: 'none' },
    { go: 'go1.19.8', hidden: [], found: 'go1.19.8' },
  ])('without Go 1.26 ($found): one line and exit 1', async ({ go, hidden, found }) => {
    const r = await setup('test', { hidden, ...(go === undefined ? {} : { go }) });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`[setup] Go 1.26 or later is needed to build the control plane and the kubelet (found: ${found}); install it from https://go.dev/dl and put it on PATH`);
  });
});
