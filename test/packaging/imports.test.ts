import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.join(import.meta.dirname, '..', '..');

/**
 * What loading the agent's `run` path pulls in, seen from a fresh Node process. Each entry
 * here is memory on every node of a cluster (docs/PERFORMANCE.md, "Where the memory goes").
 */
function loaded(entry = path.join('agent', 'agent.ts')): { builtins: string[]; files: string[] } {
  // A load hook sees every module, ES (our .ts files) and CommonJS alike; require's cache
  // alone lists only the CommonJS ones (node_modules), never the agent's own files.
  const code = `const { registerHooks, createRequire } = await import('node:module');
    const { fileURLToPath } = await import('node:url');
    const seen = new Set();
    registerHooks({ load(url, context, next) { if (url.startsWith('file:')) seen.add(fileURLToPath(url)); return next(url, context); } });
    await import(${JSON.stringify(path.join(ROOT, entry))});
    const files = [...new Set([...seen, ...Object.keys(createRequire(import.meta.url).cache)])];
    process.stdout.write(JSON.stringify({ builtins: process.moduleLoadList, files }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: ROOT, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { builtins: string[]; files: string[] };
}

describe('the agent module graph', () => {
  const { builtins, files } = loaded();

  it('does not load undici (node:http imported as ESM reads the getters that load it: 12 MiB)', () => {
    expect(builtins.filter((m) => /undici/.test(m))).toEqual([]);
  });

  it.each([
    ['@kubernetes/client-node', /@kubernetes\/client-node/],
    ['the YAML parser (only a kubeconfig file needs it)', /node_modules\/yaml\//],
    ['gRPC (only CSI mode needs it)', /agent\/files\/csi\/|node_modules\/(@grpc|protobufjs)\//],
    ['the certificate library (only the webhook needs it)', /node_modules\/(@peculiar|reflect-metadata|tsyringe)\//],
    ['the webhook', /agent\/admission\/webhook\//],
  ])('does not load %s', (_what, pattern) => {
    expect(files.filter((f) => pattern.test(f))).toEqual([]);
  });

  it('does not load HTTP/2 (only CSI mode serves it)', () => {
    expect(builtins.filter((m) => /http2/.test(m))).toEqual([]);
  });

  it('does load what it needs (the check above can see loaded modules)', () => {
    expect(builtins).toContain('NativeModule https');
    expect(files.some((f) => /node_modules\/prom-client\//.test(f))).toBe(true);
    expect(files.some((f) => /agent\/files\/reconciler\.ts$/.test(f))).toBe(true);
  });
});

describe('the CSI module graph (loaded with --csi-socket)', () => {
  const { builtins, files } = loaded(path.join('agent', 'files', 'csi', 'start.ts'));

  // gRPC is served by agent/files/csi/grpc.ts over node:http2: @grpc/grpc-js cost 3 MiB more.
  it('serves gRPC without @grpc/grpc-js or a .proto parser', () => {
    expect(files.filter((f) => /node_modules\/(@grpc|protobufjs\/(src\/parse|ext))/.test(f))).toEqual([]);
  });

  it('does load node:http2 and the codec runtime (the check above can see them)', () => {
    expect(builtins.some((m) => /http2/.test(m))).toBe(true);
    expect(files.some((f) => /node_modules\/protobufjs\//.test(f))).toBe(true);
  });
});

// render serves the CSI form too, by the driver's name alone: nothing of the CSI server is its.
describe('render module graph', () => {
  const { builtins, files } = loaded(path.join('agent', 'cli', 'render.ts'));

  it('does not load HTTP/2 or anything of the CSI driver', () => {
    expect(builtins.filter((m) => /http2/.test(m))).toEqual([]);
    expect(files.filter((f) => /agent\/files\/csi\//.test(f))).toEqual([]);
  });

  it('does load the files path it renders (the check above can see agent/files/)', () => {
    expect(files.some((f) => /agent\/files\/admission\.ts/.test(f))).toBe(true);
  });
});

// The webhook points the KEP's syntax at annotations: nothing of the CSI driver is its.
describe('the webhook module graph', () => {
  const { builtins, files } = loaded(path.join('agent', 'admission', 'webhook', 'objects.ts'));

  it('loads nothing of agent/files/csi/ and no HTTP/2', () => {
    expect(files.filter((f) => /agent\/files\/csi\//.test(f))).toEqual([]);
    expect(builtins.filter((m) => /http2/.test(m))).toEqual([]);
  });

  it('does load its own modules (the check above can see agent/)', () => {
    expect(files.some((f) => /agent\/admission\/webhook\/podspec\.ts/.test(f))).toBe(true);
  });
});
