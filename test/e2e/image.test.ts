// The image, built from the repository's Dockerfile with podman (localcluster/image), run
// with the DaemonSet's security context (uid 0, every capability dropped, a read-only root,
// the kubelet's pods directory bind-mounted) against the local control plane: it must
// serve a pod exactly as the process does. Its RSS in the container is printed beside the
// process's. A machine without podman, debootstrap or runc says so and skips (CI installs them).

import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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

  beforeAll(async () => {
    await run('bash', [path.join(ROOT, 'localcluster', 'image', 'build.sh')], { maxBuffer: 1 << 24 });
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
