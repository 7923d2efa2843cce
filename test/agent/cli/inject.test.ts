import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { buildOracle, goYamlToJson } from '../../support/gooracle.ts';
import { kepPod, kepSpec, workload } from '../../support/podspecs.ts';

const ROOT = path.join(import.meta.dirname, '..', '..', '..');
const MAIN = path.join(ROOT, 'agent', 'main.ts');
const EXAMPLES = path.join(ROOT, 'examples', 'kep');

function cli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [MAIN, 'inject', ...args], (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    child.stdin!.end(stdin ?? '');
  });
}

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const docs = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS() as Obj);

describe('ownerrefs-agent inject', () => {
  it("points the KEP's volume example at the owners annotation, and sets it as the webhook would", async () => {
    const r = await cli(['-f', path.join(EXAMPLES, 'volume-pod.yaml')]);
    expect(r).toMatchObject({ code: 0, stderr: 'document 1 (Pod kubernetes-downwardapi-volume-example): warning: the manifest lists no ownerReferences, so its owners annotation says "items":[]; pods made by controllers carry theirs\n' });
    const [pod] = docs(r.stdout);
    expect(pod!.spec.volumes[0]).toEqual({ name: 'podinfo', downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/owner-references']" } }] } });
    expect(JSON.parse(pod!.metadata.annotations['ownerrefs.dev/owner-references'])).toEqual({ kind: 'OwnerReference', apiVersion: 'meta/v1', items: [] }); // a bare pod, as the example is
    expect(pod!.spec.containers[0].args[0]).toMatch(/cat \/etc\/podinfo\/ownerReferences/); // the rest as written
  });

  it('rewrites every document of a multi-document stream, other objects unchanged, and is idempotent', async () => {
    const input = ['kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\ndata: {a: b}\n', JSON.stringify(workload('DaemonSet', kepSpec()))].join('---\n');
    const once = await cli(['-f', '-'], input);
    expect(once.code).toBe(0);
    const [cm, ds] = docs(once.stdout);
    expect(cm).toEqual({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'c' }, data: { a: 'b' } });
    expect(ds!.spec.template.spec.containers[0].env[1].valueFrom.fieldRef.fieldPath).toBe("metadata.annotations['ownerrefs.dev/owner-references']");
    const twice = await cli(['-f', '-'], once.stdout);
    expect(twice.stdout).toBe(once.stdout);
  });

  it('prints YAML that kubectl reads as the input said: "yes", "off" and "y" stay strings, a plain date stays as written', async () => {
    buildOracle();
    const cm = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations: {since: 2024-01-01, flag: "on"}\ndata: {enabled: "yes", mode: "off", short: "y", n: "0644", on: "true"}\n';
    const pod = JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'r', uid: 'u-1', controller: true }] },
      spec: { ...kepSpec(), containers: [{ name: 'app', env: [{ name: 'FEATURE', value: 'off' }, { name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] }] } });
    const r = await cli(['-f', '-'], `${cm}---\n${pod}\n`);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const [inCm] = goYamlToJson(cm) as Obj[];
    const [outCm, outPod] = goYamlToJson(r.stdout) as Obj[];
    expect(outCm).toEqual(inCm);
    expect(inCm!.metadata.annotations.since).toBe('2024-01-01');
    expect(outPod!.spec.containers[0].env[0]).toEqual({ name: 'FEATURE', value: 'off' });
  });

  it('answers JSON with JSON, a List item by item', async () => {
    const r = await cli([], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [workload('CronJob', kepSpec())] }));
    const out = JSON.parse(r.stdout) as Obj;
    expect(out.items[0].spec.jobTemplate.spec.template.spec.volumes[1].downwardAPI.items[0].fieldRef.fieldPath).toBe("metadata.annotations['ownerrefs.dev/owner-references']");
  });

  it('exits 3 with the admission message where the webhook would deny, printing nothing', async () => {
    const many = Array.from({ length: 2_000 }, (_, i) => ({ apiVersion: 'v1', kind: 'ConfigMap', name: `o-${String(i).padStart(120, '0')}`, uid: `u-${i}` }));
    const r = await cli(['-f', '-'], JSON.stringify({ ...kepPod(), metadata: { name: 'kep', namespace: 'default', ownerReferences: many } }));
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^document 1 \(Pod default\/kep\): denied: ownerrefs.dev cannot serve metadata.ownerReferences for Pod kep: the annotations would come to \d+ bytes/);
  });

  it("warns about the KEP's two controllers, which the API server refuses", async () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', ownerReferences: [
      { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'a', uid: '1', controller: true },
      { apiVersion: 'apps/v1', kind: 'Some-CRD', name: 'a', uid: '1', controller: true }] }, spec: kepSpec() };
    const r = await cli([], JSON.stringify(pod));
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/warning: the pod lists more than one owner with controller: true/);
  });

  it("prints the webhook's warning for env that reads the Node's annotation, which is empty at the first start", async () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', ownerReferences: [] },
      spec: { containers: [{ name: 'app', env: [{ name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'ownerrefs.dev/nodeOwnerReferences' } } }] }] } };
    const r = await cli([], JSON.stringify(pod));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('document 1 (Pod p): warning: env app/NODE reads ownerrefs.dev/node-owner-references, which is set only after the pod is bound to a node, so env most often gets it empty: read it from a downwardAPI volume instead\n');
    expect(JSON.parse(r.stdout).spec.containers[0].env[0].valueFrom.fieldRef.fieldPath).toBe("metadata.annotations['ownerrefs.dev/node-owner-references']");
  });

  it("names, escaped, an object whose name is not a Kubernetes name (it is echoed to a terminal)", async () => {
    const pod = { kind: 'Pod', metadata: { name: 'p\n\x1b[31mX' }, spec: kepSpec() };
    const r = await cli([], JSON.stringify(pod));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('document 1 (Pod "p\\n\\u001b[31mX"): warning: the manifest lists no ownerReferences, so its owners annotation says "items":[]; pods made by controllers carry theirs\n');
  });

  it('refuses owners Kubernetes would not decode, exit 3, instead of failing on them', async () => {
    const pod = { kind: 'Pod', metadata: { name: 'p', ownerReferences: [null] }, spec: kepSpec() };
    const r = await cli([], JSON.stringify(pod));
    expect(r).toMatchObject({ code: 3, stdout: '' });
    expect(r.stderr).toMatch(/^document 1 \(Pod p\): denied: .*metadata\.ownerReferences\[0\]: not an object\n$/);
  });

  it.each([
    { what: 'two inputs', args: ['-f', 'a.yaml', '-f', 'b.yaml'], stdin: '', code: 2, message: /^ownerrefs-agent: inject reads one input; 2 were given$/ },
    { what: 'a file and standard input', args: ['-f', 'a.yaml', '-'], stdin: '', code: 2, message: /^ownerrefs-agent: inject reads one input; 2 were given$/ },
    { what: 'only empty documents', args: [], stdin: '---\n---\n', code: 1, message: /^ownerrefs-agent: the input holds no object, only empty YAML documents$/ },
    { what: 'a directory', args: ['-f', '/'], stdin: '', code: 1, message: /^ownerrefs-agent: cannot read "\/": it is a directory$/ },
    { what: 'an input over 8 MiB (parsing costs tens of times its size)', args: ['-f', '-'], stdin: `kind: ConfigMap\n# ${'x'.repeat(8 * 1024 * 1024)}\n`, code: 1,
      message: /^ownerrefs-agent: the input is larger than 8 MiB, more than a manifest of this command can be; split it$/ },
  ])('$what: exit $code, one line', async ({ args, stdin, code, message }) => {
    const r = await cli(args, stdin);
    expect(r.code).toBe(code);
    expect(r.stderr.trimEnd()).toMatch(message);
  });

  it('reads standard input for a lone "-", as its usage line shows', async () => {
    const r = await cli(['-'], JSON.stringify({ kind: 'ConfigMap', metadata: { name: 'c' } }));
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ kind: 'ConfigMap', metadata: { name: 'c' } });
  });

  it('says in one line what is wrong with input that is not a manifest', async () => {
    const r = await cli([], 'a: [unclosed\n');
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^ownerrefs-agent: document 1: not YAML or JSON/);
    expect((await cli([], '')).stderr).toMatch(/the input is empty/);
    expect((await cli(['extra'])).code).toBe(2);
  });
});
