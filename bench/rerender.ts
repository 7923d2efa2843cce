// Re-renders the chart and the generated tables of docs/PERFORMANCE.md from a results
// file, e.g. after changing bench/support/chart.ts or report.ts, without re-measuring:
//   node bench/rerender.ts [bench/results/latest.json]

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderChart } from './support/chart.ts';
import { updateDoc, type Results } from './support/report.ts';

const ROOT = path.join(import.meta.dirname, '..');
const input = process.argv[2] ?? path.join(ROOT, 'bench/results/latest.json');
const r = JSON.parse(readFileSync(input, 'utf8')) as Results;
writeFileSync(input.replace(/\.json$/, '.svg'), renderChart(r as never));
updateDoc(path.join(ROOT, 'docs/PERFORMANCE.md'), r);
