// Where the idle agent's memory goes: RSS of a fresh Node process after importing the
// agent's dependencies one more at a time (then a full GC), median of three processes.
// Needs the compiled agent that `npm run bench` builds (bench/results/tmp/current).
//
//   node bench/imports.ts

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(import.meta.dirname, '..');
const dist = path.join(ROOT, 'bench/results/tmp/current/dist/agent');
if (!existsSync(path.join(dist, 'agent.js'))) throw new Error('run npm run bench (or bench:smoke) first: it compiles the agent');

const steps: [string, string][] = [
  ['bare Node', ''],
  ['+ node:https', "await import('node:https');"],
  ['+ pino', "await import('pino');"],
  ['+ prom-client', "await import('prom-client');"],
  ['+ chokidar', "await import('chokidar');"],
  ['+ yaml', "await import('yaml');"],
  ['+ the agent\'s own modules (agent.js, main.js\'s imports)', `await import(${JSON.stringify(path.join(dist, 'agent.js'))}); await import(${JSON.stringify(path.join(dist, 'render.js'))});`],
  ['for comparison: bare Node + @kubernetes/client-node', "await import('@kubernetes/client-node');"],
];

const rss = (code: string): number => {
  const script = `${code} for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 100)); } process.stdout.write(String(process.memoryUsage().rss));`;
  const runs = [0, 1, 2].map(() => Number(execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { cwd: ROOT })));
  return runs.sort((a, b) => a - b)[1]! / 2 ** 20;
};

let code = '';
let prev = 0;
for (const [label, add] of steps) {
  const cumulative = !label.startsWith('for comparison');
  const mib = rss(cumulative ? (code += add) : add);
  console.log(`${label.padEnd(60)} ${mib.toFixed(1).padStart(6)} MiB${cumulative && prev ? `  (+${(mib - prev).toFixed(1)})` : ''}`);
  if (cumulative) prev = mib;
}
