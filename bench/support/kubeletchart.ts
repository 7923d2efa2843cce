// bench:kubelet's chart as a self-contained SVG: per run, the p50 and p99 of an owner change
// reaching the file inside the container (the agent patches the annotation, the kubelet
// renders it) beside its floor, a label change of the same pods rendered by the same kubelet.
// A log scale, because a change the kubelet renders only at its periodic sync takes seconds
// and would flatten everything else. Written by bench/kubelet.ts and bench/rerender.ts.

import { COLORS, line, niceCeil, text } from './chart.ts';

interface P50P99 { p50: number; p99: number }
export interface KubeletChartInput {
  date: string;
  machine: { cpu: string; cores: number };
  pods: number;
  rounds: number;
  nodeCpuShares?: number;
  runs: { floor: P50P99; owners: P50P99; addedP50: number; slow?: { floor: number; owners: number } }[];
}

const W = 860;
const H = 460;
const P = { left: 80, top: 76, w: 740, h: 250 };
const FLOOR = '#888';
const OWNERS = COLORS[0]!;

const ms = (v: number) => (v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)}`);
const tick = (v: number) => (v >= 1000 ? `${v / 1000} s` : `${v} ms`);

export function renderKubeletChart(r: KubeletChartInput): string {
  const all = r.runs.flatMap((x) => [x.floor.p50, x.floor.p99, x.owners.p50, x.owners.p99]);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...all) * 0.9));
  const hi = niceCeil(Math.max(...all, 1000));
  const sy = (v: number) => P.top + P.h - (Math.log10(Math.max(lo, v) / lo) / Math.log10(hi / lo)) * P.h;
  const bottom = P.top + P.h;
  const slot = P.w / Math.max(1, r.runs.length);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fafafa"/>`,
    text(W / 2, 22, `bench:kubelet, ${r.date.slice(0, 10)}: the KEP syntax on a real kubelet`, 'text-anchor="middle" font-size="14"'),
    text(W / 2, 40, `${r.machine.cores} cores (${r.machine.cpu}); ${r.pods} pods x ${r.rounds} rounds per run` +
      (r.nodeCpuShares ? `; node side (agent, kubelet, containerd) weighted ${r.nodeCpuShares} against 1024` : ''), 'text-anchor="middle" font-size="11"'),
    `<rect x="${P.left}" y="${P.top}" width="${P.w}" height="${P.h}" fill="#fff" stroke="#888"/>`,
    text(P.left + P.w / 2, P.top - 10, 'PATCH sent to the new bytes seen in the container: p50 (dot) to p99 (bar end)', 'text-anchor="middle" font-weight="bold"'),
    text(P.left - 50, P.top + P.h / 2, 'log scale', `text-anchor="middle" transform="rotate(-90 ${P.left - 50} ${P.top + P.h / 2})"`),
  ];
  for (let v = lo; v <= hi * 1.0001; v *= 10) {
    parts.push(line(P.left, sy(v), P.left + P.w, sy(v), 'stroke="#eee"'), text(P.left - 6, sy(v) + 4, tick(v), 'text-anchor="end" font-size="11"'));
  }
  // Over a second is what bench/kubelet.ts counts as a change the kubelet carried late.
  parts.push(line(P.left, sy(1000), P.left + P.w, sy(1000), 'stroke="#000" stroke-dasharray="4 3"'),
    text(P.left + P.w - 4, sy(1000) - 4, 'over 1 s: rendered only at the kubelet\'s periodic sync', 'text-anchor="end" font-size="10"'));
  r.runs.forEach((run, i) => {
    const cx = P.left + slot * (i + 0.5);
    const marks: [P50P99, string, number][] = [[run.floor, FLOOR, -14], [run.owners, OWNERS, 14]];
    for (const [d, c, dx] of marks) {
      const x = cx + dx;
      parts.push(line(x, sy(d.p50), x, sy(d.p99), `stroke="${c}" stroke-width="3"`),
        `<circle cx="${x.toFixed(1)}" cy="${sy(d.p50).toFixed(1)}" r="4.5" fill="${c}"/>`,
        line(x - 6, sy(d.p99), x + 6, sy(d.p99), `stroke="${c}" stroke-width="3"`),
        text(dx < 0 ? x - 9 : x + 9, sy(d.p99) + 4, ms(d.p99), `text-anchor="${dx < 0 ? 'end' : 'start'}" font-size="10" fill="${c}"`));
    }
    parts.push(text(cx, bottom + 16, `run ${i + 1}`, 'text-anchor="middle" font-size="11"'),
      text(cx, bottom + 30, `added p50 ${run.addedP50.toFixed(1)} ms`, 'text-anchor="middle" font-size="10"'));
    if (run.slow) parts.push(text(cx, bottom + 43, `over 1 s: ${run.slow.floor} label, ${run.slow.owners} owner`, 'text-anchor="middle" font-size="10"'));
  });
  const legend: [string, string][] = [
    [FLOOR, 'floor: a label change of the pod, rendered by the kubelet into the same downwardAPI volume'],
    [OWNERS, 'owner change: the agent patches the pod\'s annotation, the kubelet renders it'],
  ];
  legend.forEach(([c, s], k) => {
    const y = bottom + 70 + k * 18;
    parts.push(line(P.left, y, P.left + 22, y, `stroke="${c}" stroke-width="3"`), text(P.left + 28, y + 4, s, 'font-size="11"'));
  });
  parts.push(text(P.left, bottom + 70 + 2 * 18 + 4, `added: the owner change minus the label change of the same pod in the same round; p50 over the ${r.pods * r.rounds} pairs of a run`, 'font-size="10" fill="#555"'),
    '</svg>', '');
  return parts.join('\n');
}
