// bench:fleet's chart as a self-contained SVG: (1) the reconnect storm, requests per agent
// per second after the API server restart, this run against a baseline run (the agent
// before its recovery pacer), with the kubelets' own rate per node and the issue's bound of
// one request per agent per second drawn in; (2) propagation p99 per probe node, the
// agent against the bare-watch floor on that node, measured at the same time.

interface Interval { from: number; to: number; perSecond: number }
/** This run's storm (intervals), or an older result's (a count per second from the restart). */
interface StormPart {
  agents?: number; agentAnswered?: Interval[]; serverKubelets?: Interval[];
  agentAnsweredRequestsPerSecond?: number[]; everyWatchBackAfterSeconds?: number;
}
const answeredOf = (s: StormPart): Interval[] => s.agentAnswered ?? (s.agentAnsweredRequestsPerSecond ?? []).map((v, i) => ({ from: i, to: i + 1, perSecond: v }));
export interface FleetChartInput {
  date: string; nodes: number;
  reconnect: StormPart;
  propagation?: { perNode: { node: string; agentMs: { p99: number }; floorMs: { p99: number } }[] };
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const t = (x: number, y: number, s: string, a = '') => `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${a}>${esc(s)}</text>`;
const ln = (x1: number, y1: number, x2: number, y2: number, a = '') => `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${a}/>`;
const rect = (x: number, y: number, w: number, h: number, a = '') => `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(0, w).toFixed(1)}" height="${Math.max(0, h).toFixed(1)}" ${a}/>`;

const P = { x: 70, y: 60, w: 520, h: 260 };
const Q = { x: 700, y: 60, w: 360, h: 260 };

export function renderFleetChart(r: FleetChartInput, baseline?: FleetChartInput): string {
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="1100" height="420" font-family="sans-serif" font-size="12">`,
    rect(0, 0, 1100, 420, 'fill="white"'),
    t(20, 24, `bench:fleet, ${r.date.slice(0, 16).replace('T', ' ')} UTC: ${r.nodes} hollow nodes, one agent each`, 'font-size="15" font-weight="bold"'));

  // (1) The storm: each interval a bar from its start to its end.
  const perAgent = (xs: Interval[], n: number) => xs.map((x) => ({ ...x, perSecond: Math.max(0, x.perSecond) / n }));
  const now = perAgent(answeredOf(r.reconnect), r.reconnect.agents ?? r.nodes);
  const before = baseline ? perAgent(answeredOf(baseline.reconnect), baseline.reconnect.agents ?? baseline.nodes) : [];
  const kubelets = perAgent(r.reconnect.serverKubelets ?? [], r.nodes);
  const seconds = Math.ceil(Math.max(10, ...[...now, ...before, ...kubelets].map((x) => x.to)));
  const top = Math.max(2, Math.ceil(Math.max(...[...now, ...before, ...kubelets].map((x) => x.perSecond)) * 2) / 2);
  const x = (s: number) => P.x + (s / seconds) * P.w;
  const y = (v: number) => P.y + P.h - (v / top) * P.h;
  out.push(t(P.x, P.y - 18, 'Reconnect storm: requests the API server answered, per agent per second', 'font-weight="bold"'));
  for (let v = 0; v <= top + 1e-9; v += 0.5) out.push(ln(P.x, y(v), P.x + P.w, y(v), 'stroke="#eee"'), t(P.x - 8, y(v) + 4, v.toFixed(1), 'text-anchor="end"'));
  for (const b of before) out.push(rect(x(b.from), y(b.perSecond), x(b.to) - x(b.from), P.y + P.h - y(b.perSecond), 'fill="#bbb" fill-opacity="0.7"'));
  for (const b of now) out.push(rect(x(b.from), y(b.perSecond), x(b.to) - x(b.from), P.y + P.h - y(b.perSecond), 'fill="#1f77b4" fill-opacity="0.8"'));
  const pts = kubelets.flatMap((k) => [`${x(k.from).toFixed(1)},${y(k.perSecond).toFixed(1)}`, `${x(k.to).toFixed(1)},${y(k.perSecond).toFixed(1)}`]);
  if (pts.length) out.push(`<polyline points="${pts.join(' ')}" fill="none" stroke="#ff7f0e" stroke-width="2"/>`);
  out.push(ln(P.x, y(1), P.x + P.w, y(1), 'stroke="#d62728" stroke-dasharray="6 4"'), t(P.x + P.w - 4, y(1) - 5, 'one request per agent per second', 'text-anchor="end" fill="#d62728"'));
  for (let s = 0; s <= seconds; s += Math.ceil(seconds / 10)) out.push(t(x(s), P.y + P.h + 16, String(s), 'text-anchor="middle"'));
  out.push(t(P.x + P.w / 2, P.y + P.h + 34, 'seconds since the API server restart began', 'text-anchor="middle"'));
  if (r.reconnect.everyWatchBackAfterSeconds !== undefined) {
    const b = x(r.reconnect.everyWatchBackAfterSeconds);
    out.push(ln(b, P.y, b, P.y + P.h, 'stroke="#2ca02c"'), t(b - 4, P.y + 12, 'every watch back', 'text-anchor="end" fill="#2ca02c"'));
  }
  out.push(ln(P.x, P.y + P.h, P.x + P.w, P.y + P.h, 'stroke="black"'), ln(P.x, P.y, P.x, P.y + P.h, 'stroke="black"'));
  const legend: [string, string][] = [['#1f77b4', `agents, this run (${r.reconnect.agents ?? r.nodes})`], ['#ff7f0e', 'kubelets, per node (the API server\'s count, once it is back)']];
  if (baseline) legend.unshift(['#bbb', `agents before the recovery pacer (${baseline.date.slice(0, 10)}, ${baseline.reconnect.agents ?? baseline.nodes} agents)`]);
  legend.forEach(([c, s], i) => out.push(rect(P.x, P.y + P.h + 48 + i * 16, 10, 10, `fill="${c}"`), t(P.x + 16, P.y + P.h + 57 + i * 16, s)));

  // (2) Propagation per node.
  const nodes = r.propagation?.perNode ?? [];
  if (nodes.length) {
    const vmax = Math.max(...nodes.flatMap((n) => [n.agentMs.p99, n.floorMs.p99]), 50) * 1.1;
    const qy = (v: number) => Q.y + Q.h - (v / vmax) * Q.h;
    const slot = Q.w / nodes.length;
    out.push(t(Q.x, Q.y - 18, 'Propagation p99 per node, the same moment', 'font-weight="bold"'));
    for (let v = 0; v <= vmax; v += vmax > 200 ? 100 : 25) out.push(ln(Q.x, qy(v), Q.x + Q.w, qy(v), 'stroke="#eee"'), t(Q.x - 8, qy(v) + 4, `${v} ms`, 'text-anchor="end"'));
    nodes.forEach((n, i) => {
      const x0 = Q.x + i * slot + slot * 0.15;
      const w = slot * 0.33;
      out.push(rect(x0, qy(n.floorMs.p99), w, Q.y + Q.h - qy(n.floorMs.p99), 'fill="#bbb"'),
        rect(x0 + w, qy(n.agentMs.p99), w, Q.y + Q.h - qy(n.agentMs.p99), 'fill="#1f77b4"'),
        t(x0 + w, Q.y + Q.h + 16, n.node.replace(/^hollow-/, ''), 'text-anchor="middle"'));
    });
    out.push(ln(Q.x, qy(50), Q.x + Q.w, qy(50), 'stroke="#d62728" stroke-dasharray="6 4"'), t(Q.x + Q.w - 4, qy(50) - 5, '50 ms target', 'text-anchor="end" fill="#d62728"'),
      ln(Q.x, Q.y + Q.h, Q.x + Q.w, Q.y + Q.h, 'stroke="black"'), ln(Q.x, Q.y, Q.x, Q.y + Q.h, 'stroke="black"'),
      t(Q.x + Q.w / 2, Q.y + Q.h + 34, 'probe node (hollow-NNN)', 'text-anchor="middle"'),
      rect(Q.x, Q.y + Q.h + 48, 10, 10, 'fill="#bbb"'), t(Q.x + 16, Q.y + Q.h + 57, 'floor: a bare watch of the node\'s pods'),
      rect(Q.x, Q.y + Q.h + 64, 10, 10, 'fill="#1f77b4"'), t(Q.x + 16, Q.y + Q.h + 73, 'agent: write returned to file renamed'));
  }
  out.push('</svg>');
  return out.join('\n') + '\n';
}
