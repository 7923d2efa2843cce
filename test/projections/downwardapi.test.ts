import { execFileSync } from 'node:child_process';
import path from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkSource, renderDownwardAPI, type DownwardAPISource, type DownwardPod, type ResourceList } from '../../projections/downwardapi.ts';
import { goIsPrint } from '../../projections/goquote.ts';
import { KEP_OWNERS } from '../support/fixtures.ts';
import { buildDownwardOracle, kubeletCollect } from '../support/downwardoracle.ts';

beforeAll(() => buildDownwardOracle(), 300_000);

function rendered(pod: DownwardPod, source: DownwardAPISource, allocatable?: ResourceList) {
  return Object.fromEntries(renderDownwardAPI(pod, source, allocatable).map((f) => [f.path, { mode: f.mode, text: f.bytes.toString('utf8') }]));
}

/** Printable and not, BMP and astral, quotes and escapes: what a value can hold. */
const TRICKY = ['plain', 'with "quotes" and \\', 'new\nline\ttab\u0007bell\u000bvt', '\u0000\u001f\u007f', 'ünïcödé 日本語 🎉',
  'nbsp\u00a0zwsp\u200bbom\ufeff', 'sep\u2028\u2029', 'private\ue000\u{f0000}', 'combining e\u0301', 'soft\u00adhyphen', ''];

const POD: DownwardPod = {
  metadata: {
    name: 'web-7d9f', namespace: 'shop', uid: '3f1c2a4e-0000-4000-8000-000000000001',
    labels: { app: 'web', 'app.kubernetes.io/name': 'web', tier: 'front-end_1.x' },
    annotations: Object.fromEntries(TRICKY.map((v, i) => [`example.com/a${i}`, v])),
    ownerReferences: [KEP_OWNERS[0]!],
  },
  spec: {
    containers: [
      { name: 'app', resources: { limits: { cpu: '1500m', memory: '129M', 'ephemeral-storage': '2Gi', 'hugepages-2Mi': '4Mi' }, requests: { cpu: '250m', memory: '64Mi' } } },
      { name: 'nolimits', resources: { requests: { cpu: '100m' } } },
      { name: 'zero', resources: { limits: { cpu: '0', memory: '0' } } },
      { name: 'odd', resources: { limits: { cpu: '0.3333', memory: '1.5Gi' }, requests: { cpu: '1e-3', memory: '12e6' } } },
    ],
    initContainers: [{ name: 'init', resources: { limits: { cpu: '2', memory: '1Gi' } } }],
  },
};
const ALLOC: ResourceList = { cpu: '3920m', memory: '16305688Ki', 'ephemeral-storage': '94993016264' };

const field = (path: string, fieldPath: string, mode?: number) => ({ path, fieldRef: { apiVersion: 'v1', fieldPath }, ...(mode === undefined ? {} : { mode }) });
const res = (path: string, containerName: string, resource: string, divisor?: string) => ({ path, resourceFieldRef: { containerName, resource, ...(divisor ? { divisor } : {}) } });

describe('downward API items render as the kubelet renders them', () => {
  const cases: { name: string; source: DownwardAPISource; pod?: DownwardPod; alloc?: ResourceList }[] = [
    { name: 'name, namespace, uid', source: { items: [field('name', 'metadata.name'), field('ns', 'metadata.namespace'), field('uid', 'metadata.uid')] } },
    { name: 'labels as sorted key="value" lines', source: { items: [field('labels', 'metadata.labels')] } },
    { name: 'annotations with every kind of character', source: { items: [field('annotations', 'metadata.annotations')] } },
    { name: 'subscripted label and annotation, present and absent', source: { items: [field('l', "metadata.labels['app']"), field('a', "metadata.annotations['example.com/a2']"), field('none', "metadata.labels['missing']")] } },
    { name: 'no labels at all gives an empty file', pod: { metadata: { name: 'x' } }, source: { items: [field('labels', 'metadata.labels'), field('annotations', 'metadata.annotations')] } },
    { name: 'ownerReferences in the KEP format', source: { items: [field('ownerReferences', 'metadata.ownerReferences')] } },
    { name: 'no ownerReferences: items []', pod: { metadata: { name: 'bare' } }, source: { items: [field('ownerReferences', 'metadata.ownerReferences')] } },
    { name: 'item mode, defaultMode and the default', source: { defaultMode: 0o400, items: [field('a', 'metadata.name', 0o600), field('b', 'metadata.name')] } },
    { name: 'default mode 0644 when unset', source: { items: [field('a', 'metadata.name')] } },
    { name: 'nested and uncleaned paths', source: { items: [field('a/b/c', 'metadata.name'), field('./x//y/', 'metadata.uid'), field('d/./e', 'metadata.namespace')] } },
    { name: 'cpu limits and requests, divisors 1 and 1m', source: { items: [res('l', 'app', 'limits.cpu'), res('lm', 'app', 'limits.cpu', '1m'), res('r', 'app', 'requests.cpu'), res('rm', 'app', 'requests.cpu', '1m')] } },
    { name: 'memory with each divisor family', source: { items: [res('b', 'app', 'limits.memory'), res('k', 'app', 'limits.memory', '1k'), res('mi', 'app', 'limits.memory', '1Mi'), res('gi', 'app', 'limits.memory', '1Gi'), res('rmi', 'app', 'requests.memory', '1Mi'), res('m', 'app', 'requests.memory', '1M')] } },
    { name: 'ephemeral storage and hugepages', source: { items: [res('e', 'app', 'limits.ephemeral-storage', '1Gi'), res('h', 'app', 'limits.hugepages-2Mi', '1Mi'), res('hr', 'app', 'requests.hugepages-2Mi'), res('er', 'app', 'requests.ephemeral-storage')] } },
    { name: 'missing limits fall back to node allocatable', source: { items: [res('c', 'nolimits', 'limits.cpu', '1m'), res('m', 'nolimits', 'limits.memory', '1Mi'), res('e', 'nolimits', 'limits.ephemeral-storage'), res('h', 'nolimits', 'limits.hugepages-1Gi')] } },
    { name: 'zero limits fall back to node allocatable too', source: { items: [res('c', 'zero', 'limits.cpu'), res('m', 'zero', 'limits.memory')] } },
    { name: 'no allocatable and no limit gives 0', alloc: {}, source: { items: [res('c', 'nolimits', 'limits.cpu'), res('r', 'nolimits', 'requests.memory')] } },
    { name: 'fractions and exponents round up', source: { items: [res('c', 'odd', 'limits.cpu'), res('cm', 'odd', 'limits.cpu', '1m'), res('m', 'odd', 'limits.memory', '1Gi'), res('r', 'odd', 'requests.cpu'), res('rm', 'odd', 'requests.memory', '1M')] } },
    { name: 'an init container', source: { items: [res('c', 'init', 'limits.cpu', '1m'), res('m', 'init', 'limits.memory', '1Mi')] } },
  ];

  it.each(cases)('$name', ({ source, pod, alloc }) => {
    const p = pod ?? POD;
    const a = alloc ?? ALLOC;
    expect(checkSource(source)).toEqual([]);
    const go = kubeletCollect(p, source, a);
    expect(go.error).toBeUndefined();
    expect(rendered(p, source, a)).toEqual(go.files);
  });

  it('label and annotation values of any text match Go byte for byte', () => {
    fc.assert(fc.property(fc.dictionary(fc.stringMatching(/^[a-z]([a-z0-9.-]{0,20}[a-z0-9])?$/), fc.string({ unit: 'binary', maxLength: 12 }), { maxKeys: 4 }), (annotations) => {
      const p: DownwardPod = { metadata: { annotations } };
      const source = { items: [field('a', 'metadata.annotations')] };
      expect(rendered(p, source)).toEqual(kubeletCollect(p, source).files);
    }), { numRuns: 150 });
  });

  it('a container that is not in the pod fails, as at the kubelet', () => {
    const source = { items: [res('c', 'ghost', 'limits.cpu')] };
    expect(kubeletCollect(POD, source, ALLOC).error).toMatch(/container ghost not found/);
    expect(() => renderDownwardAPI(POD, source, ALLOC)).toThrow(/container "ghost" not found/);
  });
});

describe('checkSource refuses what the API server refuses, and what we cannot serve', () => {
  const bad: { name: string; source: unknown; error: RegExp }[] = [
    { name: 'not an object', source: 'items', error: /must be an object/ },
    { name: 'an unknown field (never dropped silently)', source: { items: [], sources: [] }, error: /downwardAPI: unknown field "sources"/ },
    { name: 'an absolute path', source: { items: [field('/etc/passwd', 'metadata.name')] }, error: /relative path/ },
    { name: 'a .. element', source: { items: [field('a/../../x', 'metadata.name')] }, error: /must not contain '\.\.'/ },
    { name: 'a path starting with ..', source: { items: [field('..data', 'metadata.name')] }, error: /must not start with '\.\.'/ },
    { name: 'a path that names no file', source: { items: [field('./', 'metadata.name')] }, error: /names no file/ },
    { name: 'a file that is also a directory', source: { items: [field('a', 'metadata.name'), field('a/b', 'metadata.uid')] }, error: /both a file and the directory/ },
    { name: 'a NUL in a path', source: { items: [field('a\0b', 'metadata.name')] }, error: /NUL/ },
    { name: 'a name longer than 255 bytes', source: { items: [field('x'.repeat(256), 'metadata.name')] }, error: /too long/ },
    { name: 'a path of 33 names (the writer opens each directory on its own)', source: { items: [field(Array.from({ length: 33 }, () => 'd').join('/'), 'metadata.name')] }, error: /nested too deeply \(at most 32 names/ },
    { name: 'status fields (env only)', source: { items: [field('ip', 'status.podIP')] }, error: /not supported/ },
    { name: 'a subscript on name', source: { items: [field('n', "metadata.name['x']")] }, error: /does not support a subscript/ },
    { name: 'an invalid label key', source: { items: [field('n', "metadata.labels['bad key']")] }, error: /not a valid key/ },
    { name: 'apiVersion v2', source: { items: [{ path: 'n', fieldRef: { apiVersion: 'v2', fieldPath: 'metadata.name' } }] }, error: /only "v1"/ },
    { name: 'both refs', source: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' }, resourceFieldRef: { containerName: 'app', resource: 'limits.cpu' } }] }, error: /exactly one/ },
    { name: 'neither ref', source: { items: [{ path: 'n' }] }, error: /exactly one/ },
    { name: 'no containerName', source: { items: [{ path: 'n', resourceFieldRef: { resource: 'limits.cpu' } }] }, error: /containerName: required/ },
    { name: 'an unknown resource', source: { items: [res('n', 'app', 'limits.gpu')] }, error: /not supported/ },
    { name: 'a cpu divisor of 2', source: { items: [res('n', 'app', 'limits.cpu', '2')] }, error: /only 1m and 1/ },
    { name: 'a memory divisor of 1024 (decimal)', source: { items: [res('n', 'app', 'limits.memory', '1024')] }, error: /only 1, 1k/ },
    { name: 'a divisor that is no quantity', source: { items: [res('n', 'app', 'limits.memory', 'lots')] }, error: /not a quantity/ },
    { name: 'mode above 0777', source: { items: [field('n', 'metadata.name', 0o1777)] }, error: /mode: must be a number/ },
    { name: 'a negative defaultMode', source: { defaultMode: -1, items: [] }, error: /defaultMode/ },
    { name: 'too many items', source: { items: Array.from({ length: 129 }, (_, i) => field(`f${i}`, 'metadata.name')) }, error: /at most 128/ },
  ];

  it.each(bad)('$name', ({ source, error }) => {
    expect(checkSource(source).join('\n')).toMatch(error);
  });

  // Pod-controlled: the problems become log lines, Events and CSI errors.
  it('quotes a hostile key, escaped and cut at 80 characters', () => {
    const [problem] = checkSource({ items: [], ['\x1b[2J\n' + 'K'.repeat(300_000)]: 1 });
    expect(problem).toBe(`downwardAPI: unknown field "\\u001b[2J\\n${'K'.repeat(75)}…(300005 chars)"`);
  });

  it('reports a chain of files inside files once per path, at its shallowest conflict', () => {
    const chain = Array.from({ length: 32 }, (_, i) => field(Array.from({ length: i + 1 }, () => 'a').join('/'), 'metadata.name'));
    const problems = checkSource({ items: chain });
    expect(problems).toHaveLength(31); // every prefix of every path was 496
    expect(problems[0]).toBe('downwardAPI.items: "a" is both a file and the directory of "a/a"');
    expect(problems[30]).toBe(`downwardAPI.items: "a" is both a file and the directory of "${Array.from({ length: 32 }, () => 'a').join('/')}"`);
  });

  it('quotes the field a subscript is refused on, escaped and cut at 80 characters', () => {
    const [problem] = checkSource({ items: [field('n', `metadata.name\x1b[31m\n${'Z'.repeat(5_000)}['x']`)] });
    expect(problem).toBe(`downwardAPI.items[0].fieldRef.fieldPath: "metadata.name\\u001b[31m\\n${'Z'.repeat(61)}…(5019 chars)" does not support a subscript`);
  });

  it('names a container the pod lacks when it knows the containers', () => {
    expect(checkSource({ items: [res('n', 'ghost', 'limits.cpu')] }, 'v', new Set(['app']))).toEqual(['v.items[0].resourceFieldRef.containerName: the pod has no container "ghost"']);
  });

  it('accepts every valid divisor spelling', () => {
    for (const d of ['1', '1000m', '1k', '1M', '1Gi', '1Ei', '1e3']) expect(checkSource({ items: [res('n', 'app', 'limits.memory', d)] })).toEqual([]);
    for (const d of ['1m', '1', '0.001', '1000m']) expect(checkSource({ items: [res('n', 'app', 'limits.cpu', d)] })).toEqual([]);
  });
});

describe('goIsPrint', () => {
  it("agrees with Go's strconv.IsPrint on every code point above ASCII", () => {
    const out = execFileSync('go', ['run', './main.go'], { cwd: path.join(import.meta.dirname, 'goprint') }).toString('utf8');
    const go = new Uint8Array(0x110000);
    for (const line of out.trim().split('\n')) {
      const [a, b] = line.split(' ').map(Number) as [number, number];
      go.fill(1, a, b + 1);
    }
    const differ: number[] = [];
    for (let cp = 0x80; cp < 0x110000; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      if (goIsPrint(cp) !== (go[cp] === 1)) differ.push(cp);
    }
    expect(differ.slice(0, 10).map((c) => c.toString(16))).toEqual([]);
  }, 120_000);
});
