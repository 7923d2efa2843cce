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

  it('builds on Node 24 and runs every RUN on the builder\'s platform: the target\'s stages only copy, so another architecture needs no emulation', () => {
    const stages = dockerfile.split(/^(?=FROM )/m).slice(1).map((text) => ({ from: /^FROM (.+)$/m.exec(text)![1]!, runs: /^RUN /m.test(text) }));
    expect(stages.map((st) => st.from)).toEqual(['--platform=$BUILDPLATFORM ${NODE_IMAGE} AS build', '--platform=$TARGETPLATFORM ${NODE_TARGET_IMAGE} AS node',
      '--platform=$BUILDPLATFORM ${NODE_IMAGE} AS root', 'scratch']);
    expect(stages.filter((st) => st.runs).map((st) => st.from)).toEqual(stages.filter((st) => st.from.startsWith('--platform=$BUILDPLATFORM')).map((st) => st.from));
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    expect(dockerfile).toMatch(/^ARG NODE_TARGET_IMAGE=node:24-bookworm-slim$/m);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
  });
});
