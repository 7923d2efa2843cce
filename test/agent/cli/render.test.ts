import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../../support/tmpdir.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..', '..', '..');
const MAIN = path.join(ROOT, 'agent', 'main.ts');
const KEP_POD = path.join(ROOT, 'test', 'agent', 'cli', 'fixtures', 'kep-pod.yaml');
const cli = (...args: string[]) => run(process.execPath, [MAIN, ...args]);

const KEP_JSON = '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[' +
  '{"apiVersion":"apps/v1","kind":"DaemonSet","name":"an-owned-pod-1722852739","uid":"6be1683f-da9c-4f68-9440-82376231cfa6","controller":true,"blockOwnerDeletion":true},' +
  '{"apiVersion":"apps/v1","kind":"Some-CRD","name":"an-owned-pod-1722852739","uid":"6be1683f-da9c-4f68-9440-82376231cfa6","controller":true,"blockOwnerDeletion":true}]}';

describe('ownerrefs-agent render', () => {
  it("prints the exact KEP bytes for the KEP's example pod", async () => {
    const { stdout } = await cli('render', KEP_POD);
    const files = JSON.parse(stdout) as Record<string, string>;
    expect(files.ownerReferences).toBe(KEP_JSON);
    expect(files['ownerReferences.env']).toBe(`OWNER_REFERENCES='${KEP_JSON}'\n`);
    expect(Object.keys(files)).toEqual(['ownerReferences.env', 'dependentOwnerReferences', 'nodeOwnerReferences', 'ownerReferences']);
    // The agent's defaults: the node file too, for a node named by --node-name, the UID a placeholder.
    expect(files.nodeOwnerReferences).toBe('[{"apiVersion":"v1","kind":"Node","name":"node","uid":"00000000-0000-4000-8000-000000000000"}]');
  });

  it('writes the files into --out through the agent writer', async () => {
    const out = tmpDir();
    await cli('render', '--out', out, KEP_POD);
    expect(readdirSync(out).sort()).toEqual(['dependentOwnerReferences', 'nodeOwnerReferences', 'ownerReferences', 'ownerReferences.env']);
    expect(readFileSync(path.join(out, 'ownerReferences'), 'utf8')).toBe(KEP_JSON);
    expect(statSync(path.join(out, 'ownerReferences')).mode & 0o777).toBe(0o644);
  });

  it('reads JSON from standard input and honours --no-env-file', async () => {
    const child = execFile(process.execPath, [MAIN, 'render', '--no-env-file', '--no-node-file', '-']);
    child.stdin!.end(JSON.stringify({ kind: 'Pod', metadata: { name: 'x', annotations: { 'ownerrefs.dev/volume': 'podinfo' } },
      spec: { volumes: [{ name: 'podinfo', emptyDir: {} }] } }));
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((r) => child.on('exit', r));
    expect(JSON.parse(out)).toEqual({
      ownerReferences: '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}',
      dependentOwnerReferences: '[]',
    });
  });

  it('refuses input that is not a Pod, with a message and exit code 1', async () => {
    const f = path.join(tmpDir(), 'ds.yaml');
    writeFileSync(f, 'kind: DaemonSet\nmetadata: {name: x}\n');
    const err = await cli('render', f).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 1, stderr: expect.stringContaining('is a DaemonSet, not a Pod') });
  });

  it.each([['--help'], ['run', '--help'], ['render', '--help']])('prints usage for %s', async (...args) => {
    const { stdout } = await cli(...args);
    expect(stdout).toMatch(/^Usage: ownerrefs-agent/);
  });

  it('exits 2 with a clear message when run lacks a node name', async () => {
    const err = await run(process.execPath, [MAIN, 'run'], { env: { PATH: process.env.PATH } }).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2, stderr: expect.stringContaining('--node-name (or NODE_NAME) is required') });
  });

  // The dry run refuses what the agent refuses, with the agent's reasons, and writes nothing.
  it.each([
    { what: 'a pod that does not opt in', pod: 'kind: Pod\nmetadata: {name: x}\n', reason: /^NotOptedIn: the pod has neither the ownerrefs.dev\/volume annotation nor a csi volume/ },
    { what: 'a traversing annotation', pod: POD_WITH('"../../etc"', 'emptyDir: {}'), reason: /^InvalidAnnotation: ownerrefs.dev\/volume: "..\/..\/etc" is not a valid volume name/ },
    { what: 'an undeclared volume', pod: POD_WITH('other', 'emptyDir: {}'), reason: /^VolumeNotDeclared: volume "other": ownerrefs.dev\/volume names it, but the pod has no volume of that name/ },
    { what: 'a volume that is not an emptyDir', pod: POD_WITH('podinfo', 'hostPath: {path: /etc}'), reason: /^UnsupportedVolumeType: volume "podinfo": not an emptyDir; the agent only writes into emptyDir volumes/ },
    { what: 'a look-alike volume name, shown escaped', pod: POD_WITH('p\u043edinfo', 'emptyDir: {}'), reason: /^InvalidAnnotation: ownerrefs.dev\/volume: "p\\u043edinfo"/ },
  ])('refuses $what with the agent\'s reason, exit 3, writing nothing', async ({ pod, reason }) => {
    const out = tmpDir();
    const f = path.join(tmpDir(), 'pod.yaml');
    writeFileSync(f, pod);
    const err = await cli('render', '--out', out, f).catch((e: { code: number; stderr: string; stdout: string }) => e);
    expect(err).toMatchObject({ code: 3, stdout: '' });
    expect((err as { stderr: string }).stderr).toMatch(reason);
    expect(readdirSync(out)).toEqual([]);
  });

  it('writes the files into the valid volumes of an annotation that also names invalid ones, as the agent does, and prints its Events: exit 3', async () => {
    const out = tmpDir();
    const f = path.join(tmpDir(), 'pod.yaml');
    writeFileSync(f, POD_WITH('"podinfo,hp,../x,nosuch"', 'emptyDir: {}') + '  - name: hp\n    hostPath: {path: /etc}\n');
    const err = await cli('render', '--out', out, f).catch((e: { code: number; stderr: string; stdout: string }) => e) as { code: number; stderr: string; stdout: string };
    expect(err.code).toBe(3);
    expect(err.stderr.trimEnd().split('\n')).toEqual([
      'InvalidAnnotation: ownerrefs.dev/volume: "../x" is not a valid volume name (lower-case DNS-1123 label, at most 63 characters); set it to the name of an emptyDir volume, or a comma-separated list of them',
      'UnsupportedVolumeType: volume "hp": not an emptyDir; the agent only writes into emptyDir volumes (use emptyDir: {medium: Memory})',
      'VolumeNotDeclared: volume "nosuch": ownerrefs.dev/volume names it, but the pod has no volume of that name; add an emptyDir volume of that name to spec.volumes',
    ]);
    expect(readdirSync(out).sort()).toEqual(['dependentOwnerReferences', 'nodeOwnerReferences', 'ownerReferences', 'ownerReferences.env']);
    expect(err.stdout.split('\n')).toContain(path.join(out, 'ownerReferences'));
  });

  it('counts nodeOwnerReferences toward --max-bytes, as a default agent does, and --no-node-file leaves it out', async () => {
    const { stdout } = await cli('render', '--no-node-file', KEP_POD);
    const without = Object.values(JSON.parse(stdout) as Record<string, string>).reduce((n, t) => n + Buffer.byteLength(t), 0);
    const node = Buffer.byteLength('[{"apiVersion":"v1","kind":"Node","name":"node","uid":"00000000-0000-4000-8000-000000000000"}]');
    // Exactly at the limit without the node file: a default agent refuses it, as render does now.
    expect((await cli('render', '--no-node-file', '--max-bytes', String(without), KEP_POD)).stdout).toContain('ownerReferences');
    const err = await cli('render', '--max-bytes', String(without), KEP_POD).catch((e: { code: number; stderr: string; stdout: string }) => e);
    expect(err).toMatchObject({ code: 3, stdout: '', stderr: `TooLarge: the pod's ownerReferences render to ${without + node} bytes, over the agent's limit of ${without}; files are left as they were\n` });
  });

  it('refuses an input over 3 MiB before parsing it: exit 1, one line', async () => {
    const f = path.join(tmpDir(), 'big.yaml');
    writeFileSync(f, POD_WITH('podinfo', 'emptyDir: {}') + `# ${'x'.repeat(3 * 1024 * 1024)}\n`);
    const err = await cli('render', f).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 1, stderr: 'ownerrefs-agent: the input is larger than 3 MiB, more than a manifest of this command can be; split it\n' });
  });

  it('refuses files over --max-bytes as the agent would (TooLarge), exit 3', async () => {
    const err = await cli('render', '--max-bytes', '1024', KEP_POD).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 3, stderr: expect.stringMatching(/^TooLarge: the pod's ownerReferences render to \d+ bytes, over the agent's limit of 1024/) });
  });

  // User mistakes: one line on stderr, no stack trace, 1 for bad input and 2 for bad usage.
  it.each([
    { what: 'an empty file', input: '', code: 1, message: /the input is empty/ },
    { what: 'a scalar', input: '42\n', code: 1, message: /the input is a number, not a Pod manifest/ },
    { what: 'a list', input: '- kind: Pod\n', code: 1, message: /the input is a list, not a Pod manifest/ },
    { what: 'a DaemonSet', input: 'kind: DaemonSet\n', code: 1, message: /the input is a DaemonSet, not a Pod/ },
    { what: 'raw control bytes in the kind', input: 'kind: "Da\\x1b[31mnger"\n', code: 1, message: /Da\\u001b\[31mnger/ },
    { what: 'two YAML documents', input: 'kind: Pod\n---\nkind: Pod\n', code: 1, message: /the input holds 2 YAML documents; give one Pod manifest/ },
    { what: 'nesting deep enough to exhaust the parser', input: '['.repeat(20_000), code: 1, message: /the input is nested too deeply to be a manifest/ },
    { what: 'a kind that is a list', input: 'kind: [Pod]\n', code: 1, message: /the input's kind is a list, where a Pod has "Pod"/ },
    { what: 'a container limit that is not a quantity', input: 'kind: Pod\nspec: {containers: [{name: c, resources: {limits: {cpu: abc}}}]}\n', code: 1,
      message: /spec\.containers\[0\]\.resources\.limits\["cpu"\]: a string \("abc"\), where Kubernetes expects a quantity/ },
  ])('$what: exit $code, one line', async ({ input, code, message }) => {
    const f = path.join(tmpDir(), 'in.yaml');
    writeFileSync(f, input);
    const err = await cli('render', f).catch((e: { code: number; stderr: string }) => e) as { code: number; stderr: string };
    expect(err.code).toBe(code);
    expect(err.stderr).toMatch(message);
    expect(err.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(err.stderr).not.toMatch(/\n\s+at /);
  });

  it.each([
    { what: 'two file arguments', args: ['render', 'a.yaml', 'b.yaml'], message: /render takes at most one FILE, got 2/ },
    { what: 'an unknown flag', args: ['render', '--bogus'], message: /Unknown option '--bogus'/ },
    { what: 'a bad --max-bytes', args: ['render', '--max-bytes', 'lots'], message: /--max-bytes must be a whole number >= 1024/ },
    { what: 'a --max-bytes in exponent notation', args: ['render', '--max-bytes', '1e9'], message: /--max-bytes must be a whole number >= 1024, got "1e9"/ },
    { what: 'an --allocatable that is not a quantity', args: ['render', '--allocatable', 'cpu=4x'], message: /--allocatable: "4x" is not a Kubernetes quantity/ },
  ])('$what: exit 2, one line', async ({ args, message }) => {
    const err = await cli(...args).catch((e: { code: number; stderr: string }) => e) as { code: number; stderr: string };
    expect(err).toMatchObject({ code: 2, stderr: expect.stringMatching(message) });
    expect(err.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('names an input that cannot be read: exit 1, one line', async () => {
    const dir = tmpDir();
    const err = await cli('render', dir).catch((e: { code: number; stderr: string }) => e) as { code: number; stderr: string };
    expect(err).toMatchObject({ code: 1, stderr: `ownerrefs-agent: cannot read ${JSON.stringify(dir)}: it is a directory\n` });
  });

  it('reads a manifest that ends with an empty document (---), as kubectl does', async () => {
    const f = path.join(tmpDir(), 'pod.yaml');
    writeFileSync(f, '---\n' + POD_WITH('podinfo', 'emptyDir: {}') + '---\n');
    const { stdout } = await cli('render', f);
    expect(Object.keys(JSON.parse(stdout) as object)).toContain('ownerReferences');
  });

  it('reads YAML with an unknown directive or tag without printing the parser\'s warnings', async () => {
    const f = path.join(tmpDir(), 'pod.yaml');
    writeFileSync(f, '%FOO bar\n---\n' + POD_WITH('podinfo', 'emptyDir: {}') + 'x: !!foo y\n');
    const { stdout, stderr } = await cli('render', f);
    expect(Object.keys(JSON.parse(stdout) as object)).toContain('ownerReferences');
    expect(stderr).toBe('');
  });

  it('a missing --out directory is bad input: exit 1, one line; --debug adds the stack', async () => {
    const missing = path.join(tmpDir(), 'nope');
    const err = await cli('render', '--out', missing, KEP_POD).catch((e: { code: number; stderr: string }) => e) as { code: number; stderr: string };
    expect(err.code).toBe(1);
    expect(err.stderr).toBe(`ownerrefs-agent: --out ${JSON.stringify(missing)} does not exist; make the directory first\n`);
    const file = path.join(tmpDir(), 'f');
    writeFileSync(file, '');
    const notDir = await cli('render', '--out', file, KEP_POD).catch((e: { stderr: string }) => e) as { stderr: string };
    expect(notDir.stderr).toBe(`ownerrefs-agent: --out ${JSON.stringify(file)} is not a directory\n`);
    const debug = await cli('render', '--debug', '--out', missing, KEP_POD).catch((e: { stderr: string }) => e) as { stderr: string };
    expect(debug.stderr).toMatch(/\n\s+at /);
  });
});

function POD_WITH(annotation: string, volume: string): string {
  return `kind: Pod\nmetadata:\n  name: x\n  annotations: {ownerrefs.dev/volume: ${annotation}}\nspec:\n  volumes:\n  - name: podinfo\n    ${volume}\n`;
}

describe('ownerrefs-agent render --volume (downwardAPI items)', () => {
  const itemPod = (items: unknown[]) => JSON.stringify({ kind: 'Pod', metadata: { name: 'p', namespace: 'ns', labels: { app: 'web' } },
    spec: { containers: [{ name: 'app', resources: { requests: { cpu: '100m' } } }],
      volumes: [{ name: 'podinfo', csi: { driver: 'ownerrefs.dev', readOnly: true, volumeAttributes: { downwardAPI: JSON.stringify({ defaultMode: 0o600, items }) } } }] } });
  const withStdin = (args: string[], input: string) => new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const child = execFile(process.execPath, [MAIN, 'render', ...args, '-'], (e, out, err) => resolve({ code: e ? (e as { code?: number }).code ?? 1 : 0, out, err }));
    child.stdin!.end(input);
  });

  it('writes the items, nested paths and modes, through the agent writer; limits read --allocatable', async () => {
    const out = tmpDir();
    const r = await withStdin(['--volume', 'podinfo', '--allocatable', 'cpu=3500m', '--out', out], itemPod([
      { path: 'meta/labels', fieldRef: { fieldPath: 'metadata.labels' } },
      { path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' }, mode: 0o644 },
    ]));
    expect(r.code).toBe(0);
    expect(readFileSync(path.join(out, 'meta', 'labels'), 'utf8')).toBe('app="web"');
    expect(statSync(path.join(out, 'meta', 'labels')).mode & 0o777).toBe(0o600);
    expect(readFileSync(path.join(out, 'cpu'), 'utf8')).toBe('3500');
  });

  it('says which volumes hold items when --volume is not given', async () => {
    const r = await withStdin([], itemPod([{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }]));
    expect(r.err).toMatch(/^note: volume podinfo holds downwardAPI items, not these files; render it with --volume podinfo$/m);
  });

  it('quotes a volume name that is not a Kubernetes name, controls escaped, in its note', async () => {
    const pod = JSON.parse(itemPod([{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }])) as { spec: { volumes: { name: string }[] } };
    pod.spec.volumes[0]!.name = 'v\nEVIL\x1b[31m';
    const r = await withStdin([], JSON.stringify(pod));
    expect(r.err).toBe('note: volume "v\\nEVIL\\u001b[31m" holds downwardAPI items, not these files; render it with --volume "v\\nEVIL\\u001b[31m"\n');
  });

  it('refuses items the agent would refuse, with the reason and exit 3', async () => {
    const r = await withStdin(['--volume', 'podinfo'], itemPod([{ path: '../x', fieldRef: { fieldPath: 'metadata.name' } }]));
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/^InvalidDownwardAPI: .*must not contain '\.\.'/);
  });

  it('refuses a hand-written metadata.uid that is no pod UID as InvalidUID (not as a mirror annotation it does not have)', async () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'd', uid: '../x', annotations: { 'ownerrefs.dev/volume': 'podinfo' } },
      spec: { volumes: [{ name: 'podinfo', emptyDir: {} }], containers: [{ name: 'c', image: 'x' }] } };
    const r = await withStdin([], JSON.stringify(pod));
    expect(r.code).toBe(3);
    expect(r.err).toBe('InvalidUID: metadata.uid "../x" is not a valid pod UID\n');
  });
});
