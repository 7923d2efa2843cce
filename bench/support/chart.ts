// The benchmark's chart as a self-contained SVG (no browser or plotting library):
// propagation latency distributions (agent vs the bare-watch floor) per N, RSS against
// N, and start-up time against N, each with its target drawn in. The SVG helpers are
// shared with bench:kubelet's chart (kubeletchart.ts). Both are pure functions of their
// result file, so test/packaging/charts.test.ts can tell a stale chart.

import { MB_IN_MIB, idleShipped } from './report.ts';

interface Result {
  machine: { cpu: string; cores: number };
  versions: { kubernetes: string; node: string };
  date: string;
  idle: Record<string, { rssMiB: number }>;
  perN: {
    n: number;
    startup: { allFilesMs: number };
    propagation: { samples: { agentMs: number[]; floorMs: number[] } };
    memory: { rssAfterStartupMiB: number; rssEndMiB: number; peakRssMiB: number };
  }[];
}

export const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e'];
const PANEL = { w: 330, h: 280, top: 60, gap: 70 };
const W = 70 + 3 * (PANEL.w + PANEL.gap) - 40;
const H = 480;
/** Legend rows go under the panel, clear of the curves. */
const legendY = (k: number) => PANEL.top + PANEL.h + 62 + k * 16;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
export const text = (x: number, y: number, s: string, attrs = '') => `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(s)}</text>`;
export const line = (x1: number, y1: number, x2: number, y2: number, attrs = '') =>
  `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${attrs}/>`;
const poly = (pts: [number, number][], attrs: string) =>
  `<polyline fill="none" points="${pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}" ${attrs}/>`;

interface Axis { x0: number; y0: number; sx: (v: number) => number; sy: (v: number) => number }

function frame(i: number, title: string, xLabel: string, yLabel: string): { parts: string[]; left: number } {
  const left = 70 + i * (PANEL.w + PANEL.gap);
  const parts = [
    `<rect x="${left}" y="${PANEL.top}" width="${PANEL.w}" height="${PANEL.h}" fill="#fff" stroke="#888"/>`,
    text(left + PANEL.w / 2, PANEL.top - 12, title, 'text-anchor="middle" font-weight="bold"'),
    text(left + PANEL.w / 2, PANEL.top + PANEL.h + 38, xLabel, 'text-anchor="middle"'),
    text(left - 48, PANEL.top + PANEL.h / 2, yLabel, `text-anchor="middle" transform="rotate(-90 ${left - 48} ${PANEL.top + PANEL.h / 2})"`),
  ];
  return { parts, left };
}

function ticks(parts: string[], ax: Axis, xs: number[], ys: number[], fx: (v: number) => string, fy: (v: number) => string): void {
  const bottom = PANEL.top + PANEL.h;
  for (const v of xs) {
    const x = ax.sx(v);
    parts.push(line(x, PANEL.top, x, bottom, 'stroke="#eee"'), text(x, bottom + 16, fx(v), 'text-anchor="middle" font-size="11"'));
  }
  for (const v of ys) {
    const y = ax.sy(v);
    parts.push(line(ax.x0, y, ax.x0 + PANEL.w, y, 'stroke="#eee"'), text(ax.x0 - 6, y + 4, fy(v), 'text-anchor="end" font-size="11"'));
  }
}

/** A round number (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above x. */
export function niceCeil(x: number): number {
  const p = 10 ** Math.floor(Math.log10(x));
  return ([1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((m) => m * p >= x) ?? 10) * p;
}

function latencyPanel(r: Result): string[] {
  const { parts, left } = frame(0, 'Propagation latency (CDF)', 'ms from API write returned (log scale)', 'fraction of pods');
  const lo = 0.1;
  const worst = Math.max(...r.perN.flatMap((p) => p.propagation.samples.agentMs));
  const hi = 10 ** Math.max(3, Math.ceil(Math.log10(worst)));
  const sx = (v: number) => left + (Math.log10(Math.min(hi, Math.max(lo, v)) / lo) / Math.log10(hi / lo)) * PANEL.w;
  const sy = (f: number) => PANEL.top + PANEL.h - f * PANEL.h;
  const ax = { x0: left, y0: PANEL.top + PANEL.h, sx, sy };
  const decades = Array.from({ length: Math.round(Math.log10(hi / lo)) + 1 }, (_, k) => lo * 10 ** k);
  ticks(parts, ax, decades, [0, 0.25, 0.5, 0.75, 0.99], (v) => String(Math.round(v * 10) / 10), (v) => String(v));
  parts.push(line(sx(50), PANEL.top, sx(50), PANEL.top + PANEL.h, 'stroke="#000" stroke-dasharray="4 3"'),
    text(sx(50) + 3, PANEL.top + 12, 'target p99 50 ms', 'font-size="10"'));
  const cdf = (vals: number[]): [number, number][] => {
    const s = [...vals].sort((a, b) => a - b);
    const step = Math.max(1, Math.floor(s.length / 300));
    const pts: [number, number][] = [];
    for (let i = 0; i < s.length; i += step) pts.push([sx(s[i]!), sy((i + 1) / s.length)]);
    pts.push([sx(s[s.length - 1]!), sy(1)]);
    return pts;
  };
  r.perN.forEach((p, i) => {
    const c = COLORS[i % COLORS.length]!;
    parts.push(poly(cdf(p.propagation.samples.agentMs), `stroke="${c}" stroke-width="2"`));
    parts.push(poly(cdf(p.propagation.samples.floorMs), `stroke="${c}" stroke-width="1.5" stroke-dasharray="5 3"`));
    parts.push(line(left, legendY(i), left + 22, legendY(i), `stroke="${c}" stroke-width="2"`),
      text(left + 26, legendY(i) + 4, `N=${p.n}: agent (solid), bare watch floor (dashed)`, 'font-size="11"'));
  });
  parts.push(text(left, legendY(r.perN.length) + 4, 'floor values at or below 0.1 ms are drawn at 0.1', 'font-size="10" fill="#555"'));
  return parts;
}

function xyPanel(i: number, title: string, yLabel: string, r: Result, series: { label: string; pts: [number, number][] }[],
  targets: { y: number; label: string; x?: number }[]): string[] {
  const { parts, left } = frame(i, title, 'pods on the node (N)', yLabel);
  const nMax = Math.max(...r.perN.map((p) => p.n), 1);
  const yMax = niceCeil(Math.max(...series.flatMap((s) => s.pts.map(([, y]) => y)), ...targets.map((t) => t.y)) * 1.1);
  const sx = (n: number) => left + 10 + (n / nMax) * (PANEL.w - 20);
  const sy = (v: number) => PANEL.top + PANEL.h - (v / yMax) * PANEL.h;
  const yt = [0, 0.25, 0.5, 0.75, 1].map((f) => f * yMax);
  ticks(parts, { x0: left, y0: 0, sx, sy }, [0, ...r.perN.map((p) => p.n)], yt, String, String);
  for (const t of targets) {
    const x1 = t.x === undefined ? left : Math.max(left, sx(t.x) - 20);
    const x2 = t.x === undefined ? left + PANEL.w : Math.min(left + PANEL.w, sx(t.x) + 20);
    const anchor = x2 > left + PANEL.w / 2 ? `x="${x2.toFixed(1)}" text-anchor="end"` : `x="${x1.toFixed(1)}"`;
    parts.push(line(x1, sy(t.y), x2, sy(t.y), 'stroke="#000" stroke-dasharray="4 3"'),
      `<text ${anchor} y="${(sy(t.y) - 4).toFixed(1)}" font-size="10">${esc(t.label)}</text>`);
  }
  series.forEach((s, k) => {
    const c = COLORS[k % COLORS.length]!;
    parts.push(poly(s.pts.map(([x, y]) => [sx(x), sy(y)]), `stroke="${c}" stroke-width="2"`));
    for (const [x, y] of s.pts) parts.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="3" fill="${c}"/>`);
    parts.push(line(left, legendY(k), left + 22, legendY(k), `stroke="${c}" stroke-width="2"`),
      text(left + 26, legendY(k) + 4, s.label, 'font-size="11"'));
  });
  return parts;
}

export function renderChart(r: Result): string {
  const idle = idleShipped(r.idle);
  const nMax = Math.max(...r.perN.map((p) => p.n));
  const mem = xyPanel(1, 'Agent RSS', 'MiB', r, [
    { label: 'after start-up (N=0: idle)', pts: [[0, idle], ...r.perN.map((p) => [p.n, p.memory.rssAfterStartupMiB] as [number, number])] },
    { label: 'end of run', pts: r.perN.map((p) => [p.n, p.memory.rssEndMiB]) },
    { label: 'peak (VmHWM)', pts: r.perN.map((p) => [p.n, p.memory.peakRssMiB]) },
  ], [{ y: 70 * MB_IN_MIB, label: 'idle target 70 MB', x: 0 }, { y: 100 * MB_IN_MIB, label: 'target 100 MB at N=1000', x: nMax }]);
  const startup = xyPanel(2, 'Start-up: spawn to all files correct', 'ms', r, [
    { label: 'all N files correct', pts: r.perN.map((p) => [p.n, p.startup.allFilesMs]) },
  ], [{ y: 2000, label: 'target 2 s at N=1000', x: nMax }]);
  const title = `ownerrefs-agent benchmark, ${r.date.slice(0, 10)}: ${r.machine.cores} cores (${r.machine.cpu}), Kubernetes ${r.versions.kubernetes}, Node ${r.versions.node}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fafafa"/>`,
    text(W / 2, 22, title, 'text-anchor="middle" font-size="14"'),
    ...latencyPanel(r), ...mem, ...startup,
    '</svg>', '',
  ].join('\n');
}
