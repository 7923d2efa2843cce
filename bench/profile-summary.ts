// Summarises V8 .cpuprofile files (from `npm run bench -- --profile`): self time by
// function and by package, so "where does the time go" has an answer in numbers.
//
//   node bench/profile-summary.ts bench/results/tmp/prof/*.cpuprofile

import { readFileSync } from 'node:fs';

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount: number; children?: number[] }
interface Profile { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

function where(url: string): string {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.includes('/agent/') || url.includes('/projections/')) return url.replace(/^.*\/(agent|projections)\//, '$1/');
  if (url.startsWith('node:')) return url;
  return url || '(native/V8)';
}

for (const file of process.argv.slice(2)) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const byFn = new Map<string, number>();
  const byPkg = new Map<string, number>();
  let total = 0;
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    if (n.callFrame.functionName === '(idle)') continue;
    total += us;
    const fn = `${n.callFrame.functionName || '(anonymous)'} ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    const pkg = ['(garbage collector)', '(program)'].includes(n.callFrame.functionName) ? n.callFrame.functionName : where(n.callFrame.url).split(':')[0]!;
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + us);
  }
  const top = (m: Map<string, number>, k: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k)
    .map(([name, us]) => `  ${(us / 1000).toFixed(1).padStart(8)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${name}`).join('\n');
  process.stdout.write(`${file}: ${(total / 1000).toFixed(0)} ms on the main thread (excluding idle)\nby package/file:\n${top(byPkg, 15)}\nby function:\n${top(byFn, 25)}\n\n`);
}
