import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.join(import.meta.dirname, '..', '..');

describe('ownerrefs-agent run', () => {
  it('exits 1 with one line when the start fails half-way, instead of idling with handles open', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ownerrefs-main-'));
    const kubeconfig = path.join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    }));
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
