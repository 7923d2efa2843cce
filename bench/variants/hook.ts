// `node --import <compiled hook.js>` (or hook.ts itself, for bench/pipeline.ts) with
// OWNERREFS_BENCH_SHIMS=name,name: swaps one module
// of the agent (or one of its dependencies) for a what-if stand-in from this directory,
// for the benchmark's what-if variants. The agent's own files are not edited; each shim
// answers "what would the agent cost without X, or with X done differently?".
//
//   poolfs    agent/files/volume/writer.ts gets the thread-pool call set for memory-backed volumes
//             too (./poolfs.ts): what issuing tmpfs calls inline saves.
//   nowatch   agent/files/volume/dirwatch.ts's VolumeDirWatcher does nothing (./nowatch.ts): no inotify
//             watch, no directory event, no stamp check; self-heal is off.
//   metrics   prom-client is replaced by a minimal implementation (./metrics.ts).
//   logger    pino is replaced by a minimal JSON-lines logger (./logger.ts).
//   noyaml    yaml is replaced by JSON.parse (./noyaml.ts; the bench then writes the
//             kubeconfig as JSON): what a pod with in-cluster credentials loads, which
//             reads no kubeconfig and so never loads the YAML parser.

import { registerHooks } from 'node:module';

const wanted = new Set((process.env.OWNERREFS_BENCH_SHIMS ?? '').split(',').filter(Boolean));
// Compiled (the bench's agent runs JS) or the sources (`node --import ./bench/variants/hook.ts`).
const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const format = ext === '.ts' ? 'module-typescript' : 'module';
const shim = (name: string) => new URL(`./${name}${ext}`, import.meta.url).href;
/** The importing module is the agent's `file` (compiled .js, or the .ts source). */
const from = (parent: string | undefined, file: string) => parent !== undefined && /\.[jt]s$/.test(parent) && parent.slice(0, -3).endsWith(file);

for (const w of wanted) {
  if (!['poolfs', 'nowatch', 'metrics', 'logger', 'noyaml'].includes(w)) throw new Error(`unknown bench shim ${w}`);
}

registerHooks({
  resolve(specifier, context, next) {
    const parent = context.parentURL;
    if (wanted.has('metrics') && specifier === 'prom-client') return { url: shim('metrics'), format, shortCircuit: true };
    if (wanted.has('logger') && specifier === 'pino') return { url: shim('logger'), format, shortCircuit: true };
    if (wanted.has('noyaml') && specifier === 'yaml') return { url: shim('noyaml'), format, shortCircuit: true };
    const r = next(specifier, context);
    if (wanted.has('nowatch') && /\/agent\/files\/volume\/dirwatch\.[jt]s$/.test(r.url)) return { url: shim('nowatch'), format, shortCircuit: true };
    if (wanted.has('poolfs') && /\/agent\/files\/volume\/fsops\.[jt]s$/.test(r.url) && from(parent, '/agent/files/volume/writer')) {
      return { url: `${shim('poolfs')}?real=${encodeURIComponent(r.url)}`, format, shortCircuit: true };
    }
    return r;
  },
});
