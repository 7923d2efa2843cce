import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_ENV, NODE_FLAGS, NODE_FLAGS_OPTIMIZING } from '../../agent/config.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');

describe('Dockerfile', () => {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

  it('runs the agent with the V8 flags the tests and bench use (NODE_FLAGS)', () => {
    const entry = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
    expect(entry).toEqual(['node', ...NODE_FLAGS, 'dist/agent/main.js']);
  });

  it.each([['NODE_FLAGS', NODE_FLAGS], ['NODE_FLAGS_OPTIMIZING (the chart\'s v8.optimizingCompilers)', NODE_FLAGS_OPTIMIZING]])(
    'uses V8 flags that this Node accepts (an unknown one makes node exit with "bad option"): %s', (_name, flags) => {
      const code = 'JSON.stringify(process.execArgv)';
      const r = spawnSync(process.execPath, [...flags, '-p', code], { encoding: 'utf8' });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual([...flags, '-p', code]);
    });

  it('optimises a hot function with NODE_FLAGS_OPTIMIZING and never with NODE_FLAGS, and shares the other flags', () => {
    // V8's own verdict (bit 16 of %GetOptimizationStatus: optimised code, by Maglev or TurboFan).
    const code = 'function f(x){return x+1};%PrepareFunctionForOptimization(f);f(1);f(2);%OptimizeFunctionOnNextCall(f);f(3);(%GetOptimizationStatus(f)&16)!==0';
    const optimised = (flags: readonly string[]) => spawnSync(process.execPath, [...flags, '--allow-natives-syntax', '-p', code], { encoding: 'utf8' }).stdout.trim();
    expect(optimised(NODE_FLAGS)).toBe('false');
    expect(optimised(NODE_FLAGS_OPTIMIZING)).toBe('true');
    expect(NODE_FLAGS_OPTIMIZING).toEqual(['--max-semi-space-size=1', '--memory-saver-mode']);
  });

  it('sets the environment the tests and bench run the agent with (AGENT_ENV)', () => {
    for (const [k, v] of Object.entries(AGENT_ENV)) expect(dockerfile).toMatch(new RegExp(`^ENV ${k}=${v}$`, 'm'));
  });

  it('builds on Node 24, on the builder\'s platform, into the target\'s Node 24 base, and ships production dependencies only', () => {
    expect([...dockerfile.matchAll(/^FROM (.+)$/gm)].map((m) => m[1])).toEqual(['--platform=$BUILDPLATFORM node:24-bookworm-slim AS build', '--platform=$TARGETPLATFORM ${BASE}']);
    expect(dockerfile).toMatch(/^ARG BASE=node:24-bookworm-slim$/m);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
  });
});
