// Builds and runs the agent the way it ships (compiled JavaScript, NODE_ENV=production,
// as in the Dockerfile) and reads its /metrics. Also builds a "baseline" agent from a
// git ref, to measure memory before and after a change on the same cluster.

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { NODE_FLAGS } from '../../agent/config.ts';
import { startAgentProcess, type AgentProcess } from '../../localcluster/agentproc.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
export const TMP = path.join(ROOT, 'bench', 'results', 'tmp'); // git-ignored
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** A compiled agent, and the Node flags it runs with (NODE_FLAGS of its own agent/config.ts). */
export interface BuiltAgent {
  main: string;
  nodeFlags: readonly string[];
}

/**
 * Compiles agent/ and projections/ of the work tree (or of `ref`) to JS, under TMP/`dir`
 * (default: "current", or "baseline-REF"): a running agent built there keeps its files.
 */
export function buildAgent(ref?: string, dir?: string): BuiltAgent {
  const name = dir ?? (ref ? `baseline-${ref.replace(/[^\w.-]/g, '_')}` : 'current');
  const src = path.join(TMP, name);
  rmSync(src, { recursive: true, force: true });
  mkdirSync(src, { recursive: true });
  if (ref) {
    // Below the repo root, so bare imports resolve to the same node_modules.
    const tar = execFileSync('git', ['-C', ROOT, 'archive', ref, 'agent', 'projections', 'tsconfig.json', 'tsconfig.build.json']);
    execFileSync('tar', ['-x', '-C', src], { input: tar });
  } else {
    for (const p of ['agent', 'projections', 'tsconfig.json', 'tsconfig.build.json']) cpSync(path.join(ROOT, p), path.join(src, p), { recursive: true });
  }
  // --noCheck: emit only; type errors are the type-check's business, not the benchmark's.
  execFileSync(process.execPath, [TSC, '-p', path.join(src, 'tsconfig.build.json'), '--noCheck', '--outDir', path.join(src, 'dist')], { stdio: 'inherit' });
  // As the Dockerfile does: CSI mode loads its generated codec from beside the compiled code
  // (generated/ today; proto/ in older versions, agent/csi/ before the files path had a folder).
  for (const csi of [['agent', 'files', 'csi'], ['agent', 'csi']])
    for (const dir of ['generated', 'proto']) {
      const from = path.join(src, ...csi, dir);
      if (existsSync(from)) cpSync(from, path.join(src, 'dist', ...csi, dir), { recursive: true });
    }
  const main = path.join(src, 'dist', 'agent', 'main.js');
  if (!existsSync(main)) throw new Error(`build produced no ${main}`);
  return { main, nodeFlags: ref ? nodeFlagsOf(path.join(src, 'agent', 'config.ts')) : NODE_FLAGS };
}

/** NODE_FLAGS as an older agent/config.ts declares it (none before it existed). */
function nodeFlagsOf(configTs: string): string[] {
  const m = /export const NODE_FLAGS[^=]*=\s*(\[[^\]]*\])/.exec(readFileSync(configTs, 'utf8'));
  return m ? (JSON.parse(m[1]!.replace(/'/g, '"')) as string[]) : [];
}

/**
 * Compiles bench/variants (the what-if shims and their loader hook) to JS, so the compiled
 * agent can load them without TypeScript support; returns the hook to --import, which
 * swaps in the shims named in OWNERREFS_BENCH_SHIMS.
 */
export function buildVariants(): string {
  const out = path.join(TMP, 'variants');
  const dir = path.join(ROOT, 'bench', 'variants');
  rmSync(out, { recursive: true, force: true });
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => path.join(dir, f));
  execFileSync(process.execPath, [TSC, '--noCheck', '--module', 'nodenext', '--target', 'es2024', '--rootDir', dir, '--outDir', out, ...files], { stdio: 'inherit' });
  return path.join(out, 'hook.js');
}

/**
 * The compiled agent as one file (rolldown, which vitest's vite brings along), to see
 * whether bundling saves memory. Undefined when rolldown is not installed.
 */
export function bundleAgent(mainJs: string): string | undefined {
  const bin = path.join(ROOT, 'node_modules', 'rolldown', 'bin', 'cli.mjs');
  if (!existsSync(bin)) return undefined;
  const out = path.join(path.dirname(path.dirname(mainJs)), 'bundle');
  rmSync(out, { recursive: true, force: true });
  try {
    // A directory, not one file: lazily imported modules become their own chunks.
    execFileSync(process.execPath, [bin, mainJs, '--platform', 'node', '--format', 'esm', '-d', out], { stdio: 'pipe' });
  } catch (err) {
    process.stderr.write(`bundling skipped: ${String((err as { stderr?: Buffer }).stderr ?? err).slice(0, 500)}\n`);
    return undefined;
  }
  return path.join(out, 'main.js');
}

/** File system type of a directory (for the report). */
export function fsType(dir: string): string {
  try {
    return execFileSync('stat', ['-f', '-c', '%T', dir]).toString().trim();
  } catch {
    return '?';
  }
}

/**
 * The agent the way it ships (compiled, NODE_ENV=production, logging at info), through the
 * one spawner the tests use too; a stop that takes over 10 s is ended with SIGKILL.
 */
export function startAgent(opts: {
  main: string; kubeconfig: string; nodeName: string; kubeletRoot: string; args?: string[];
  /** The flags the agent ships with (agent/config.ts NODE_FLAGS, as the Dockerfile runs it). */
  nodeFlags?: readonly string[];
  /** Node's own flags, e.g. --cpu-prof, after `nodeFlags`. */
  nodeArgs?: string[];
  env?: Record<string, string>;
}): Promise<AgentProcess> {
  return startAgentProcess({
    main: opts.main, kubeconfig: opts.kubeconfig, nodeName: opts.nodeName, kubeletRoot: opts.kubeletRoot, args: opts.args ?? [],
    ...(opts.nodeFlags ? { nodeFlags: opts.nodeFlags } : {}), extraNodeFlags: opts.nodeArgs ?? [],
    env: { NODE_ENV: 'production', ...opts.env }, logLevel: 'info', startTimeoutMs: 300_000, killAfterMs: 10_000,
  });
}

/** Per-bucket counts of a Prometheus histogram from a metrics map (cumulative `le` buckets). */
export function histogram(m: Map<string, number>, name: string): { le: number; count: number }[] {
  const out: { le: number; count: number }[] = [];
  for (const [k, v] of m) {
    const hit = new RegExp(`^${name}_bucket\\{.*le="([^"]+)"`).exec(k);
    if (hit) out.push({ le: hit[1] === '+Inf' ? Infinity : Number(hit[1]), count: v });
  }
  return out.sort((a, b) => a.le - b.le);
}
