import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../../support/tmpdir.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..', '..', '..');
const MAIN = path.join(ROOT, 'agent', 'main.ts');
const KEP_POD = path.join(ROOT, 'examples', 'kep-pod.yaml');
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
    expect(Object.keys(files)).toEqual(['ownerReferences.env', 'dependentOwnerReferences', 'ownerReferences']);
  });

  it('writes the files into --out through the agent writer', async () => {
    const out = tmpDir();
    await cli('render', '--out', out, KEP_POD);
    expect(readdirSync(out).sort()).toEqual(['dependentOwnerReferences', 'ownerReferences', 'ownerReferences.env']);
    expect(readFileSync(path.join(out, 'ownerReferences'), 'utf8')).toBe(KEP_JSON);
    expect(statSync(path.join(out, 'ownerReferences')).mode & 0o777).toBe(0o644);
  });

  it('reads JSON from standard input and honours --no-env-file', async () => {
    const child = execFile(process.execPath, [MAIN, 'render', '--no-env-file', '-']);
    child.stdin!.end(JSON.stringify({ kind: 'Pod', metadata: { name: 'x' } }));
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
});
