// Where the idle agent's memory goes: RSS of a fresh Node process (with the agent's
// NODE_FLAGS) after importing the agent's dependencies one more at a time (then a full GC),
// median of five processes. Needs the compiled agent and the compiled what-if shims that
// `npm run bench` (or any bench run without --no-extras) leaves in bench/results/tmp.
//
//   node bench/imports.ts

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { NODE_FLAGS } from '../agent/config.ts';

const ROOT = path.join(import.meta.dirname, '..');
const dist = path.join(ROOT, 'bench/results/tmp/current/dist/agent');
const hook = path.join(ROOT, 'bench/results/tmp/variants/hook.js');
if (!existsSync(path.join(dist, 'agent.js')) || !existsSync(hook)) throw new Error('run npm run bench first: it compiles the agent and the shims');

const agent = `await import(${JSON.stringify(path.join(dist, 'agent.js'))});`;
// What kubeconfig.ts does when it reads a kubeconfig file (never in a pod: in-cluster credentials).
const yaml = `(await import('node:module')).createRequire(${JSON.stringify(path.join(dist, 'kube', 'kubeconfig.js'))})('yaml');`;

const steps: [string, string, string?][] = [
  ['bare Node', ''],
  ['+ node:https', "await import('node:https');"],
  ['+ node:http, as the agent loads it (process.getBuiltinModule)', "process.getBuiltinModule('node:http');"],
  ['+ chokidar', "await import('chokidar');"],
  ['+ pino', "await import('pino');"],
  ['+ prom-client', "await import('prom-client');"],
  ['+ the agent\'s own modules (agent.js and its imports): the agent in a pod', agent],
  ['+ yaml (a kubeconfig file is read: the bench, not a pod)', yaml],
];
const OPT = NODE_FLAGS.filter((f) => f !== '--no-opt' && f !== '--no-maglev');
const others: [string, string, string?, string[]?][] = [
  ['agent.js, pino replaced by the bench\'s minimal logger', agent, 'logger'],
  ['agent.js, prom-client replaced by the bench\'s hand-written metrics', agent, 'metrics'],
  ['agent.js, both replaced', agent, 'logger,metrics'],
  ['agent.js with V8\'s optimising compilers (without --no-opt --no-maglev)', agent, '', OPT],
  ['bare Node with V8\'s optimising compilers', '', '', OPT],
  ['bare Node + pino alone', "await import('pino');"],
  ['bare Node + prom-client alone', "await import('prom-client');"],
  ['bare Node + `import \'node:http\'` (its ESM wrapper reads the getters that load undici)', "await import('node:http');"],
  ['bare Node + @kubernetes/client-node (what the agent no longer loads)', "await import('@kubernetes/client-node');"],
];

const rss = (code: string, shims = '', flags: readonly string[] = NODE_FLAGS): number => {
  const script = `${code} for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 100)); } process.stdout.write(String(process.memoryUsage().rss));`;
  const runs = [0, 1, 2, 3, 4].map(() => Number(execFileSync(process.execPath,
    [...flags, '--expose-gc', '--import', hook, '--input-type=module', '-e', script],
    { cwd: ROOT, env: { ...process.env, OWNERREFS_BENCH_SHIMS: shims } })));
  return runs.sort((a, b) => a - b)[2]! / 2 ** 20;
};

let code = '';
let prev = 0;
for (const [label, add] of steps) {
  const mib = rss((code += add));
  console.log(`${label.padEnd(78)} ${mib.toFixed(1).padStart(6)} MiB${prev ? `  (+${(mib - prev).toFixed(1)})` : ''}`);
  prev = mib;
}
for (const [label, add, shims, flags] of others) {
  const mib = rss(add, shims, flags);
  console.log(`${label.padEnd(78)} ${mib.toFixed(1).padStart(6)} MiB`);
}
