// The image, built from the repository's Dockerfile with podman (localcluster/image), run
// with the DaemonSet's security context (uid 0, every capability dropped, a read-only root,
// the kubelet's pods directory bind-mounted) against the local control plane: it must
// serve a pod exactly as the process does. Its RSS in the container is printed beside the
// process's. A machine without podman, debootstrap or runc says so and skips (CI installs them).

import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../localcluster/wait.ts';
import { useE2E } from '../support/e2e.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..', '..');
const MISSING = ['podman', 'debootstrap', 'runc'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
if (MISSING.length > 0) console.warn(`NO IMAGE TEST: this machine lacks ${MISSING.join(', ')}; the image tests are SKIPPED (CI installs them)`);
const IMAGE = 'localhost/ownerrefs/ownerrefs-agent:dev';
const rssMiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe.runIf(MISSING.length === 0)('the image (podman, runc)', () => {
  const e = useE2E('image');
  let container = '';
  let processRss = 0;
  let archive = '';

  beforeAll(async () => {
    archive = (await run('bash', [path.join(ROOT, 'localcluster', 'image', 'build.sh')], { maxBuffer: 1 << 24 })).stdout.trim().split('\n').pop()!;
    processRss = rssMiB(e.agent.child.pid!);
    await e.agent.stop(); // the container takes over the same node and kubelet root
    const kubeconfig = path.join(e.kubeletRoot, 'agent.kubeconfig');
    // The kubeconfig names the control plane's CA file: the same path, read-only, in the container.
    const caDir = path.dirname(e.kc.getCurrentCluster()!.caFile!);
    const { stdout } = await run('podman', ['--runtime', 'runc', 'run', '-d', '--rm', '--network', 'host', '--user', '0:0', '--read-only', '--cap-drop=ALL',
      '--security-opt', 'no-new-privileges', '-v', `${e.kubeletRoot}:${e.kubeletRoot}`, '-v', `${caDir}:${caDir}:ro`, IMAGE,
      'run', `--node-name=${e.nodeName}`, `--kubeconfig=${kubeconfig}`, `--kubelet-root=${e.kubeletRoot}`, '--health-addr=127.0.0.1:0', '--log-level=debug']);
    container = stdout.trim();
  }, 900_000);
  afterAll(async () => {
    if (container) await run('podman', ['--runtime', 'runc', 'rm', '-f', container]).catch(() => undefined);
  });

  it('is 50 MB or less compressed, in three layers (Debian\'s libraries, Node, the agent), with no shell, package manager or npm, and Debian\'s packages recorded for scanners', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'image-layout-'));
    try {
      await run('tar', ['-xf', archive, '-C', dir]);
      const blob = (digest: string) => path.join(dir, 'blobs', 'sha256', digest.replace(/^sha256:/, ''));
      const index = JSON.parse(readFileSync(path.join(dir, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
      const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as { layers: { mediaType: string; size: number; digest: string }[] };
      expect(manifest.layers.map((l) => l.mediaType)).toEqual(Array(3).fill('application/vnd.oci.image.layer.v1.tar+gzip'));
      const mb = manifest.layers.map((l) => l.size / 1e6);
      console.log(`image: ${mb.reduce((a, b) => a + b).toFixed(1)} MB compressed (layers ${mb.map((m) => m.toFixed(1)).join(' + ')})`);
      expect(mb.reduce((a, b) => a + b)).toBeLessThanOrEqual(50);
      const files = new Set<string>();
      for (const l of manifest.layers) for (const f of (await run('tar', ['-tzf', blob(l.digest)], { maxBuffer: 1 << 26 })).stdout.split('\n')) files.add(f.replace(/^\.?\//, '').replace(/\/$/, ''));
      expect(['usr/local/bin/node', 'usr/local/bin/ownerrefs-agent', 'app/dist/agent/main.js', 'etc/passwd', 'usr/lib/os-release',
        ...['base-files', 'libc6', 'libgcc-s1', 'libstdc++6', 'gcc-12-base'].map((p) => `var/lib/dpkg/status.d/${p}`),
        ...['base-files', 'libc6', 'gcc-12-base'].map((p) => `usr/share/doc/${p}/copyright`), 'usr/share/doc/libgcc-s1', 'usr/share/doc/libstdc++6'].filter((f) => !files.has(f))).toEqual([]);
      expect(['bin/sh', 'usr/bin/sh', 'bin/bash', 'usr/bin/env', 'usr/bin/apt', 'usr/bin/dpkg', 'usr/local/bin/npm', 'app/node_modules/@types'].filter((f) => files.has(f))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serves a pod from the container as the process does, and reports its RSS beside the process\'s', async () => {
    const logs = async () => (await run('podman', ['logs', container])).stdout;
    await waitFor(async () => (await logs()).includes('"msg":"agent started"') || undefined, { describe: 'the agent in the container starts', diagnostics: logs });
    const cm = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: 'image-owner' } } });
    const owner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'image-owner', uid: cm.metadata!.uid! };
    const pod = await e.core.createNamespacedPod({ namespace: e.ns, body: { metadata: { name: 'image-pod', annotations: { 'ownerrefs.dev/volume': 'podinfo' }, ownerReferences: [owner] },
      spec: { nodeName: e.nodeName, containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'podinfo', emptyDir: {} }] } } });
    const text = await waitFor(() => { const t = e.file(pod); return t?.includes('image-owner') ? t : undefined; },
      { describe: 'the file, written by the container', diagnostics: async () => (await logs()).split('\n').slice(-15).join('\n') });
    expect(text).toBe(`{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"apiVersion":"v1","kind":"ConfigMap","name":"image-owner","uid":"${owner.uid}"}]}`);
    const pid = Number(execFileSync('podman', ['inspect', '--format', '{{.State.Pid}}', container]).toString().trim());
    const inContainer = rssMiB(pid);
    console.log(`agent RSS: ${processRss.toFixed(1)} MiB as a process (from source), ${inContainer.toFixed(1)} MiB in the container (compiled, the image's Node flags)`);
    expect(inContainer).toBeGreaterThan(0);
    // The DaemonSet's security context held: uid 0, no capabilities, read-only root.
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    expect(status).toMatch(/^Uid:\s+0\s/m);
    expect(status).toMatch(/^CapEff:\s+0000000000000000$/m);
  });
});
