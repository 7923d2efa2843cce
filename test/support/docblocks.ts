// The shell blocks of the user docs, as test/e2e/docs.test.ts runs them and
// test/packaging/docs.test.ts checks them.
//
// A ```sh block is run as written, from the repository root, and must exit 0. A ```console
// block's `$ ` lines are run one by one; the lines after each are its expected output, in
// full, where `…` matches anything within a line. The line right before a fence may say,
// visibly, that the test does otherwise:
//   *Not run by the docs test: REASON.*                                   (skipped)
//   *The docs test runs this as a dry run: REASON.*                        (helm --dry-run=client, kubectl apply --dry-run=server)
// ```text and ```yaml blocks are shown, never run.

import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

export const ROOT = path.join(import.meta.dirname, '..', '..');

export type How = 'run' | 'skip' | 'dry-run';
export interface Block {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: 'sh' | 'console';
  how: How;
  /** Why it is not run as written (the marker's reason). */
  reason?: string;
  body: string;
}

const MARKERS: readonly [How, RegExp][] = [
  ['skip', /^\*Not run by the docs test: (.+)\.\*$/],
  ['dry-run', /^\*The docs test runs this as a dry run: (.+)\.\*$/],
];

/** The pages whose commands users run, in the order a reader meets them (the e2e test runs them so). */
export function userDocs(): string[] {
  const walk = (dir: string): string[] => readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? walk(path.join(dir, d.name)) : d.name.endsWith('.md') ? [path.join(dir, d.name)] : []);
  const first = ['README.md', 'docs/INSTALL.md', 'docs/CONCEPTS.md'];
  const rest = walk('docs').filter((f) => !first.includes(f)).sort();
  return [...first, ...rest, 'SECURITY.md', 'CHANGELOG.md'];
}

/** The sh and console blocks of one page, with how each is to be run. */
export function shellBlocks(file: string): Block[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    if (end < 0) throw new Error(`${file}:${i + 1}: a fence that is never closed`);
    const lang = open[1]!;
    if (lang === 'sh' || lang === 'console') {
      const before = (lines[i - 1] ?? '').trim();
      const marker = MARKERS.map(([how, re]) => [how, re.exec(before)] as const).find(([, m]) => m);
      // A marker mistyped is a block run for real: refused, not read as none.
      if (!marker && /^\*(Not run by|The docs test)\b/.test(before)) throw new Error(`${file}:${i}: "${before}" is no marker the docs test knows (a colon after "test" or "dry run", then the reason)`);
      out.push({ file, line: i + 1, lang, how: marker?.[0] ?? 'run', reason: marker?.[1]![1], body: lines.slice(i + 1, end).join('\n') });
    }
    i = end;
  }
  return out;
}

/** A dry-run block's commands: each helm install or upgrade and kubectl apply made a dry run. */
export function asDryRun(body: string): string {
  return body.replace(/[ \t]*\\\n\s*/g, ' ').split('\n').map((l) => {
    const [cmd, comment] = splitComment(l);
    if (/^\s*helm (install|upgrade)\b/.test(cmd)) return `${cmd.trimEnd()} --dry-run=client${comment}`;
    if (/^\s*kubectl apply\b/.test(cmd)) return `${cmd.trimEnd()} --dry-run=server${comment}`;
    return l;
  }).join('\n');
}

/** A line split at a shell comment outside quotes (good enough for the docs' one-liners). */
function splitComment(l: string): [string, string] {
  let q = '';
  for (let i = 0; i < l.length; i++) {
    const c = l[i]!;
    if (q) { if (c === q) q = ''; continue; }
    if (c === '"' || c === "'") q = c;
    else if (c === '#' && (i === 0 || /\s/.test(l[i - 1]!))) return [l.slice(0, i), ` ${l.slice(i)}`];
  }
  return [l, ''];
}

/** A console block as commands, each with the output it shows. */
export function consoleSteps(body: string): { command: string; expected: string[] }[] {
  const steps: { command: string; expected: string[] }[] = [];
  for (const l of body.split('\n')) {
    if (l.startsWith('$ ')) steps.push({ command: l.slice(2), expected: [] });
    else if (steps.length) steps.at(-1)!.expected.push(l);
    else throw new Error(`console block output before any "$ " command: ${l}`);
  }
  return steps;
}

/** Does `actual` (a command's output) match the shown lines, `…` matching anything within a line? */
export function outputMatches(expected: readonly string[], actual: string): boolean {
  const got = actual.replace(/\n$/, '').split('\n').map((l) => l.trimEnd());
  const want = expected.map((l) => l.trimEnd());
  while (want.length && want.at(-1) === '') want.pop();
  if (got.length !== want.length) return false;
  return want.every((w, i) => new RegExp(`^${w.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`).test(got[i]!));
}

/** The commands in an example manifest's leading comment: its `#   kubectl ...` lines. */
export function exampleCommands(text: string): string[] {
  const out: string[] = [];
  for (const l of text.split('\n')) {
    if (!l.startsWith('#')) break;
    const m = /^#\s{2,}(kubectl .+)$/.exec(l);
    if (m) out.push(m[1]!);
  }
  return out;
}

/** The ```yaml blocks of one `## heading` section of a page, parsed, in order. */
export function yamlBlocks(file: string, heading: string): unknown[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`${file}: no section "## ${heading}"`);
  const section = text.slice(start + 1).split('\n## ')[0]!;
  return [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => parse(m[1]!) as unknown);
}
