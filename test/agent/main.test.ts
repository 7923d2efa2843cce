import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.join(import.meta.dirname, '..', '..');

/** A scratch directory holding a kubeconfig whose API server never answers (port 1). */
function unreachableCluster(): { dir: string; kubeconfig: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-main-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
  }));
  return { dir, kubeconfig };
}

describe('ownerrefs-agent run', () => {
  it('exits 1 with one line when the start fails half-way, instead of idling with handles open', () => {
    const { dir, kubeconfig } = unreachableCluster();
    const notADir = path.join(dir, 'file');
    writeFileSync(notADir, '');
    // The directory watch is up by the time the CSI socket's directory cannot be made.
    const r = spawnSync(process.execPath, [path.join(ROOT, 'agent', 'main.ts'), 'run', '--node-name=n1', `--kubeconfig=${kubeconfig}`,
      `--kubelet-root=${dir}`, '--health-addr=127.0.0.1:0', `--csi-socket=${path.join(notADir, 'csi.sock')}`, '--registration-dir='],
    { encoding: 'utf8', timeout: 30_000 });
    expect(r.signal).toBeNull(); // not killed by the timeout
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^ownerrefs-agent: .*(ENOTDIR|EEXIST)/);
  });
});

/** `run` against a cluster that never answers, its stdout until a line holding `msg`, then stopped. */
async function runUntil(msg: string): Promise<string[]> {
  const { dir, kubeconfig } = unreachableCluster();
  const child = spawn(process.execPath, [path.join(ROOT, 'agent', 'main.ts'), 'run', '--node-name=n1', `--kubeconfig=${kubeconfig}`,
    `--kubelet-root=${dir}`, '--health-addr=127.0.0.1:0', '--registration-dir='], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  await new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes(`"msg":"${msg}"`)) resolve();
  }));
  child.kill('SIGTERM');
  await new Promise((resolve) => child.on('exit', resolve));
  return out.trim().split('\n');
}

describe('ownerrefs-agent run logs', () => {
  it('names the node once per line (a repeated JSON key is read differently by each log pipeline)', async () => {
    const lines = await runUntil('agent started');
    expect(lines.find((l) => l.includes('"msg":"agent started"'))).toMatch(/"node":"n1"/);
    for (const l of lines) expect(l.match(/"node":/g) ?? []).toHaveLength(1);
  });

  it('logs an unreachable API server as its message and errno, without a stack on every retry', async () => {
    const lines = await runUntil('watch failed; retrying');
    const line = JSON.parse(lines.find((l) => l.includes('"msg":"watch failed; retrying"'))!) as { err: Record<string, unknown> };
    expect(line.err).toEqual({ type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED' });
  });
});

describe('ownerrefs-agent doctor', () => {
  it('runs the node\'s own checks when the credentials cannot be loaded, and reports that as a finding', () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-main-'));
    mkdirSync(path.join(root, 'pods'));
    const r = spawnSync(process.execPath, [path.join(ROOT, 'agent', 'main.ts'), 'doctor', '--node-name=n1', '--kubeconfig=/nonexistent/kubeconfig', `--kubelet-root=${root}`],
      { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^OK +kubelet root: /m);
    expect(r.stdout).toMatch(/^FAIL API server: the credentials could not be loaded: cannot read kubeconfig \/nonexistent\/kubeconfig: ENOENT/m);
    expect(r.stderr).toBe('');
  });
});

describe('ownerrefs-agent output', () => {
  const MAIN = path.join(ROOT, 'agent', 'main.ts');

  it('ends quietly with 141 when the reader of its output goes away (| head), never with a stack trace', async () => {
    // A List of 3,000 pods prints far more than a pipe holds, so the write meets EPIPE.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-main-'));
    const list = path.join(dir, 'list.json');
    writeFileSync(list, JSON.stringify({ kind: 'List', items: Array.from({ length: 3000 }, (_, i) => ({ kind: 'Pod', metadata: { name: `p${i}` }, spec: {} })) }));
    const child = spawn(process.execPath, [MAIN, 'inject', '-f', list], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.once('data', () => child.stdout.destroy()); // read one chunk, then close: `| head -c`
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(141);
    expect(stderr).toBe('');
  });

  it('says in one line, exit 1, when its output cannot be written (a full disk)', () => {
    const r = spawnSync(process.execPath, [MAIN, 'render', path.join(ROOT, 'test', 'agent', 'cli', 'fixtures', 'kep-pod.yaml')],
      { encoding: 'utf8', stdio: ['ignore', openSync('/dev/full', 'w'), 'pipe'], timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^ownerrefs-agent: cannot write to standard output: ENOSPC/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('answers an unknown command in one line, exit 2', () => {
    const r = spawnSync(process.execPath, [MAIN, 'bogus\x1b[2J'], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^ownerrefs-agent: unknown command "bogus\\u001b\[2J"; the commands are run, render, webhook, gate, inject and doctor/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('ownerrefs-agent --version', () => {
  const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  it.each([['--version'], ['version']])('%s prints package.json\'s version, from the checkout as from the image\'s layout', (arg) => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'agent', 'main.ts'), arg], { encoding: 'utf8' });
    expect(r).toMatchObject({ status: 0, stdout: `ownerrefs-agent ${version}\n`, stderr: '' });
  });
});
