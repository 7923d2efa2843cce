// What-if shim (bench/variants/hook.ts, "metrics"): the part of prom-client the agent
// uses (Registry, Counter, Gauge, Histogram, collectDefaultMetrics), written out in about
// a hundred lines with the Prometheus text format. It answers "what would a hand-written
// metrics module save in RSS?" (prom-client loads its own dependencies and every default
// collector). The default process metrics are reduced to CPU, RSS, heap and start time.

type Labels = Record<string, string | number>;

const esc = (v: string | number) => String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const labelText = (l: Labels, extra?: [string, string]) => {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${esc(v)}"`);
  if (extra) parts.push(`${extra[0]}="${esc(extra[1])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
};
const num = (x: number) => (x === Infinity ? '+Inf' : String(x));

interface Metric { name: string; help: string; type: string; lines(): string[] }

export class Registry {
  readonly contentType = 'text/plain; version=0.0.4; charset=utf-8';
  readonly #metrics: Metric[] = [];

  registerMetric(m: Metric): void {
    this.#metrics.push(m);
  }

  async metrics(): Promise<string> {
    return this.#metrics.map((m) => [`# HELP ${m.name} ${m.help}`, `# TYPE ${m.name} ${m.type}`, ...m.lines()].join('\n')).join('\n') + '\n';
  }
}

interface Config { name: string; help: string; labelNames?: readonly string[]; registers?: Registry[]; buckets?: number[] }

abstract class Base implements Metric {
  readonly name: string;
  readonly help: string;
  abstract readonly type: string;
  protected readonly values = new Map<string, { labels: Labels; value: number }>();

  constructor(c: Config) {
    this.name = c.name;
    this.help = c.help;
    for (const r of c.registers ?? []) r.registerMetric(this);
  }

  protected add(labels: Labels, by: number): void {
    const key = JSON.stringify(labels);
    const v = this.values.get(key);
    if (v) v.value += by;
    else this.values.set(key, { labels, value: by });
  }

  lines(): string[] {
    if (this.values.size === 0 && this.type !== 'histogram') return [`${this.name} 0`];
    return [...this.values.values()].map((v) => `${this.name}${labelText(v.labels)} ${num(v.value)}`);
  }

  async get(): Promise<{ values: { labels: Labels; value: number }[] }> {
    return { values: [...this.values.values()] };
  }
}

const args = (a?: Labels | number, b?: number): [Labels, number] => (typeof a === 'object' ? [a, b ?? 1] : [{}, a ?? 1]);

export class Counter extends Base {
  readonly type = 'counter';
  inc(a?: Labels | number, b?: number): void {
    this.add(...args(a, b));
  }
}

export class Gauge extends Base {
  readonly type = 'gauge';
  inc(a?: Labels | number, b?: number): void {
    this.add(...args(a, b));
  }
  dec(a?: Labels | number, b?: number): void {
    const [l, by] = args(a, b);
    this.add(l, -by);
  }
  set(a: Labels | number, b?: number): void {
    const [l, v] = typeof a === 'object' ? [a, b ?? 0] : [{}, a];
    this.values.set(JSON.stringify(l), { labels: l, value: v });
  }
}

export class Histogram extends Base {
  readonly type = 'histogram';
  readonly #buckets: number[];
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(c: Config) {
    super(c);
    this.#buckets = [...(c.buckets ?? [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]), Infinity];
    this.#counts = this.#buckets.map(() => 0);
  }

  observe(v: number): void {
    const i = this.#buckets.findIndex((b) => v <= b);
    this.#counts[i] = (this.#counts[i] ?? 0) + 1;
    this.#sum += v;
    this.#count++;
  }

  override lines(): string[] {
    let cum = 0;
    return [
      ...this.#buckets.map((b, i) => `${this.name}_bucket${labelText({}, ['le', num(b)])} ${(cum += this.#counts[i] ?? 0)}`),
      `${this.name}_sum ${this.#sum}`, `${this.name}_count ${this.#count}`,
    ];
  }
}

/** A few process metrics, computed when scraped. */
export function collectDefaultMetrics(o: { register: Registry; prefix?: string }): void {
  const p = o.prefix ?? '';
  const start = Date.now() / 1000 - process.uptime();
  const gauge = (name: string, help: string, type: string, value: () => number) =>
    o.register.registerMetric({ name: p + name, help, type, lines: () => [`${p}${name} ${value()}`] });
  gauge('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', 'counter', () => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1e6;
  });
  gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', 'gauge', () => process.memoryUsage.rss());
  gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', 'gauge', () => process.memoryUsage().heapUsed);
  gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', 'gauge', () => start);
}
