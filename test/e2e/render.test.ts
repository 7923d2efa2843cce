// `render` is the agent's dry run: for the same Pod manifest, the running agent and `render`
// must agree on the Warning Events (reason and text) and on the files each served volume
// gets. Each case is created on the cluster (bound to the node, owned by a real object so
// the garbage collector keeps it), the agent's Events and files are read, and `render` runs
// on the same manifest with the same --max-bytes.

import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/cluster.ts';
import { useE2E } from '../support/e2e.ts';

const MAIN = path.join(import.meta.dirname, '..', '..', 'agent', 'main.ts');
const MAX_BYTES = 4096;
const PLACEHOLDER_UID = '00000000-0000-4000-8000-000000000000';

/** render's answer: its exit code, its Event lines, and the files it would write. */
async function render(pod: V1Pod, args = [`--max-bytes=${MAX_BYTES}`]): Promise<{ code: number; events: string[]; files: Record<string, string> | undefined }> {
  const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(process.execPath, [MAIN, 'render', ...args, '-'], (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    child.stdin!.end(JSON.stringify(pod));
  });
  return { code: r.code, events: r.stderr.split('\n').filter((l) => l !== ''), files: r.stdout === '' ? undefined : JSON.parse(r.stdout) as Record<string, string> };
}

describe('render and the running agent agree on the same pods', () => {
  const e = useE2E('render', { agentArgs: [`--max-bytes=${MAX_BYTES}`] });

  const emptyDir = (name: string) => ({ name, emptyDir: {} });
  const cases: { what: string; annotation: string; volumes: object[]; owners?: number; served: string[] }[] = [
    { what: 'valid and invalid volumes in one annotation', annotation: 'podinfo,hp,../x,nosuch', volumes: [emptyDir('podinfo'), { name: 'hp', hostPath: { path: '/etc' } }], served: ['podinfo'] },
    { what: 'a valid volume and a traversal', annotation: 'a,../b', volumes: [emptyDir('a')], served: ['a'] },
    { what: 'only a volume that is not an emptyDir', annotation: 'hp', volumes: [{ name: 'hp', hostPath: { path: '/etc' } }], served: [] },
    { what: 'two valid volumes', annotation: 'a, b', volumes: [emptyDir('a'), emptyDir('b')], served: ['a', 'b'] },
    // At most --max-bytes without nodeOwnerReferences, over it with: a default agent refuses it.
    { what: 'files over --max-bytes only with the node file counted', annotation: 'podinfo', volumes: [emptyDir('podinfo')], owners: 12, served: [] },
  ];
  let n = 0;

  it.each(cases)('$what', async ({ annotation, volumes, owners = 1, served }) => {
    const prefix = `c${n++}-${Date.now().toString(36)}`;
    const manifest = (names: string[], uids: string[]): V1Pod => ({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { generateName: 'render-', namespace: e.ns, annotations: { 'ownerrefs.dev/volume': annotation },
        ownerReferences: names.map((name, i) => ({ apiVersion: 'v1', kind: 'ConfigMap', name, uid: uids[i]! })) },
      spec: { nodeName: e.nodeName, containers: [{ name: 'app', image: 'busybox' }], volumes: volumes as NonNullable<V1Pod['spec']>['volumes'] },
    });
    let names = Array.from({ length: owners }, (_, i) => `${prefix}-${i}`);
    if (owners > 1) {
      // Pad the last owner's name so that the files without the node file come to at most
      // MAX_BYTES: each character of a name is in three files.
      const sized = await render(manifest(names, names.map(() => PLACEHOLDER_UID)), ['--no-node-file', '--max-bytes=1048576']);
      const total = Object.values(sized.files!).reduce((t, f) => t + Buffer.byteLength(f), 0);
      const pad = Math.floor((MAX_BYTES - total) / 3);
      expect(pad).toBeGreaterThan(0);
      names = [...names.slice(0, -1), `${names.at(-1)}-${'x'.repeat(pad - 1)}`];
    }
    const uids = await Promise.all(names.map(async (name) => (await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name } } })).metadata!.uid!));
    const body = manifest(names, uids);
    const pod = await e.core.createNamespacedPod({ namespace: e.ns, body });
    const expected = await render({ ...body, metadata: { ...body.metadata, name: pod.metadata!.name!, uid: pod.metadata!.uid! } });
    const node = await e.core.readNode({ name: e.nodeName });

    // The agent's Events on the pod, and its files in each volume.
    const events = await waitFor(async () => {
      const list = (await e.core.listNamespacedEvent({ namespace: e.ns, fieldSelector: `involvedObject.uid=${pod.metadata!.uid}` })).items
        .filter((x) => x.reason === 'OwnerRefsProjectionFailed');
      return list.length >= expected.events.length ? list.map((x) => x.message!) : undefined;
    }, { describe: `${expected.events.length} Events`, diagnostics: e.diagnostics });
    const filesIn = (volume: string) => {
      const dir = e.kubelet.volumeDir(pod.metadata!.uid!, volume);
      return existsSync(dir) ? Object.fromEntries(readdirSync(dir).filter((f) => !f.startsWith('.')).map((f) => [f, readFileSync(path.join(dir, f), 'utf8')])) : {};
    };
    if (served.length > 0) {
      await waitFor(() => served.every((v) => existsSync(path.join(e.kubelet.volumeDir(pod.metadata!.uid!, v), 'ownerReferences'))) || undefined,
        { describe: 'the files in every served volume', diagnostics: e.diagnostics });
    } else {
      await new Promise((r) => setTimeout(r, 1_000)); // a file the agent should not write would be there by now
    }

    expect(events.sort()).toEqual([...expected.events].sort());
    expect(expected.code).toBe(expected.events.length > 0 ? 3 : 0);
    const onNode = expected.files && JSON.parse(JSON.stringify(expected.files).replaceAll(PLACEHOLDER_UID, node.metadata!.uid!)) as Record<string, string>;
    for (const v of volumes.map((x) => (x as { name: string }).name)) {
      expect(filesIn(v), `volume ${v}`).toEqual(served.includes(v) ? onNode : {});
    }
    if (served.length === 0) expect(expected.files).toBeUndefined();
  });
});
