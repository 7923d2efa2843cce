// The bystander of bench:storm: another client of the API server (a ServiceAccount of its
// own, so API Priority and Fairness files it with every other ServiceAccount, in
// workload-low) making a steady mix of reads and writes of ConfigMaps, open-loop at a fixed
// rate: each request is sent on schedule whether or not earlier ones were answered, so a slow
// API server shows as latency, not as fewer requests. Every answer is kept with the time it was
// sent, for the bench to cut into windows (quiet, storm).

import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { mergePatch } from '../../../localcluster/patch.ts';
import { nowMs } from '../stats.ts';

export const BYSTANDER_OBJECTS = 20;

export interface Answer { at: number; ms: number; op: string; ok: boolean }

export interface Bystander {
  readonly answers: readonly Answer[];
  /** Answers of requests sent in [from, to) (nowMs). */
  between(from: number, to: number): Answer[];
  stop(): Promise<void>;
}

/** Creates its ConfigMaps, then runs at `rate` requests a second until stopped. */
export async function startBystander(kc: KubeConfig, namespace: string, rate: number): Promise<Bystander> {
  const api = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < BYSTANDER_OBJECTS; i++) await api.createNamespacedConfigMap({ namespace, body: { metadata: { name: `by-${i}` }, data: { n: '0' } } });
  // A cycle of five: read one, list all, patch one, create one, delete one.
  const ops: [string, (k: number) => Promise<unknown>][] = [
    ['get', (k) => api.readNamespacedConfigMap({ namespace, name: `by-${k % BYSTANDER_OBJECTS}` })],
    ['list', () => api.listNamespacedConfigMap({ namespace })],
    ['patch', (k) => api.patchNamespacedConfigMap({ namespace, name: `by-${k % BYSTANDER_OBJECTS}`, body: { data: { n: String(k) } } }, mergePatch)],
    ['create', (k) => api.createNamespacedConfigMap({ namespace, body: { metadata: { name: `tmp-${k}` } } })],
    // The one created four cycles before (answered long since, even during a storm); a read until there is one.
    ['delete', (k) => k > 20 ? api.deleteNamespacedConfigMap({ namespace, name: `tmp-${k - 21}` }) : api.readNamespacedConfigMap({ namespace, name: 'by-0' })],
  ];
  const answers: Answer[] = [];
  const inFlight = new Set<Promise<void>>();
  const start = nowMs();
  let k = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    if (stopped) return;
    // Every request due by now is sent now (a late timer does not lower the rate).
    while (start + (k * 1000) / rate <= nowMs()) {
      const due = start + (k * 1000) / rate;
      const [op, run] = ops[k % ops.length]!;
      const n = k++;
      const p = run(n).then(() => true, () => false).then((ok) => { answers.push({ at: due, ms: nowMs() - due, op, ok }); });
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
    timer = setTimeout(tick, Math.max(1, start + (k * 1000) / rate - nowMs()));
  };
  tick();
  return {
    answers,
    between: (from, to) => answers.filter((a) => a.at >= from && a.at < to),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await Promise.all(inFlight);
    },
  };
}
