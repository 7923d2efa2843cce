import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderChart } from '../../bench/support/chart.ts';
import { renderKubeletChart, type KubeletChartInput } from '../../bench/support/kubeletchart.ts';
import { DOCS, renderDoc, type Results } from '../../bench/support/report.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const json = <T>(file: string) => JSON.parse(read(file)) as T;
const FIX = 'npm run bench:rerender redraws them from the result files';

/**
 * The benchmark's charts and generated tables are drawn from committed result files; a chart
 * or table edited by hand, or left behind when its JSON or renderer changed, would show
 * numbers that no run measured.
 */
describe('the benchmark charts and tables match their result files', () => {
  it('bench/results/latest.svg is drawn from latest.json', () => {
    expect(renderChart(json('bench/results/latest.json')) === read('bench/results/latest.svg'), FIX).toBe(true);
  });

  it('bench/results/kubelet.svg is drawn from kubelet.json', () => {
    expect(renderKubeletChart(json<KubeletChartInput>('bench/results/kubelet.json')) === read('bench/results/kubelet.svg'), FIX).toBe(true);
  });

  it.each(DOCS)('the generated tables of %s are latest.json\'s', (doc) => {
    const text = read(doc);
    expect(renderDoc(text, json<Results>('bench/results/latest.json'), doc) === text, FIX).toBe(true);
  });
});
