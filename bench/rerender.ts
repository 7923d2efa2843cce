// Redraws the benchmark's charts and the generated tables of its pages from result files,
// without measuring, e.g. after changing support/chart.ts, kubeletchart.ts or report.ts:
//   npm run bench:rerender                     latest.svg, kubelet.svg and the pages' tables
//   npm run bench:rerender -- FILE.json ...    each file's chart beside it (by its shape)
// Only bench/results/latest.json feeds the pages' tables, as in bench/run.ts. Running it
// twice changes nothing: every output is a pure function of its JSON.

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderChart } from './support/chart.ts';
import { renderKubeletChart, type KubeletChartInput } from './support/kubeletchart.ts';
import { updateDocs, type Results } from './support/report.ts';

const ROOT = path.join(import.meta.dirname, '..');
const RESULTS = path.join(ROOT, 'bench/results');
const inputs = process.argv.length > 2 ? process.argv.slice(2).map((f) => path.resolve(f)) : ['latest.json', 'kubelet.json'].map((f) => path.join(RESULTS, f));

for (const input of inputs) {
  const r = JSON.parse(readFileSync(input, 'utf8')) as Record<string, unknown>;
  const svg = input.replace(/\.json$/, '') + '.svg';
  if (Array.isArray(r.perN)) {
    writeFileSync(svg, renderChart(r as never));
    if (input === path.join(RESULTS, 'latest.json')) {
      const changed = updateDocs(ROOT, r as unknown as Results);
      process.stdout.write(`tables: ${changed.length ? `rewrote ${changed.join(', ')}` : 'unchanged'}\n`);
    }
  } else if (Array.isArray(r.runs)) {
    writeFileSync(svg, renderKubeletChart(r as unknown as KubeletChartInput));
  } else {
    throw new Error(`${input}: neither npm run bench's results (perN) nor bench:kubelet's (runs)`);
  }
  process.stdout.write(`wrote ${path.relative(process.cwd(), svg)}\n`);
}
