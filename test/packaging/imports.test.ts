import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.join(import.meta.dirname, '..', '..');

/**
 * What loading the agent's `run` path pulls in, seen from a fresh Node process. Each entry
 * here is memory on every node of a cluster (docs/PERFORMANCE.md, "Where the memory goes").
 */
function loaded(): { builtins: string[]; files: string[] } {
  const code = `await import(${JSON.stringify(path.join(ROOT, 'agent', 'agent.ts'))});
    const { createRequire } = await import('node:module');
    process.stdout.write(JSON.stringify({ builtins: process.moduleLoadList, files: Object.keys(createRequire(import.meta.url).cache) }));`;
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
    ['gRPC (only CSI mode needs it)', /node_modules\/@grpc\//],
    ['the certificate library (only the webhook needs it)', /node_modules\/(@peculiar|reflect-metadata|tsyringe)\//],
    ['the webhook', /agent\/webhook\//],
  ])('does not load %s', (_what, pattern) => {
    expect(files.filter((f) => pattern.test(f))).toEqual([]);
  });

  it('does load what it needs (the check above can see loaded modules)', () => {
    expect(builtins).toContain('NativeModule https');
    expect(files.some((f) => /node_modules\/prom-client\//.test(f))).toBe(true);
  });
});
