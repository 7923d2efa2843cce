// GateLifter: the half of admission.mode=policy that needs reads. A Pod created reading a value
// of its controller chain (the workload's name, uid, kind, the chain, the OpenTelemetry
// attributes) gets SCHEDULING_GATE and GATED_LABEL from the policy (admission/policy/), so no
// container of it starts before those values are in its annotations. This writes them and
// lifts the gate.
//
//   1. A pod event (a watch of pods with GATED_LABEL, every namespace): a pod that still carries
//      the gate is queued; one without it (lifted, or never gated) is forgotten.
//   2. A run walks the pod's chain (AdmissionChains: owners' metadata from the watch cache,
//      shared by every pod that has them, waited for within the budget). A chain still
//      Pending or Unavailable keeps the pod gated: retried with backoff, with one Warning
//      Event on the pod saying what it waits for. The scheduler shows the pod as
//      SchedulingGated meanwhile; it is never lost or refused. A chain this reader cannot
//      finish (Forbidden, a kind not followed) is written as the webhook writes it, with an Event.
//   3. One JSON PATCH: tests the pod's uid and the gate at its index, sets each chain
//      annotation the pod reads, removes the gate and the label. The test makes a second
//      replica, or a run on an old view, harmless: its PATCH fails (422) and the next event
//      decides.
//   4. 404: the pod is gone. 409 and 422: the pod changed since the view; the next event (or
//      the retry) runs it again. Any other failure: a Warning Event and a log line, retried
//      with backoff. An annotation is never removed or blanked here.

import type { Logger } from 'pino';
import { annotationChanges, annotationsRead, CHAIN_KEYS } from '../../../projections/annotations.ts';
import { isSettled, type ChainEnd, type ControllerChain } from '../../../projections/chain.ts';
import { GATED_LABEL, SCHEDULING_GATE, type AnnotationKey } from '../../../projections/names.ts';
import type { OwnerReference } from '../../../projections/types.ts';
import { realClock, type Clock } from '../../common/clock.ts';
import { WorkQueue } from '../../common/queue.ts';
import { ApiError, type ApiClient } from '../../kube/client.ts';
import type { EventSink } from '../../kube/events.ts';
import type { ReflectorHandler } from '../../kube/reflectorcontract.ts';
import { F } from '../../monitoring/logfields.ts';

export const REASON_GATE_WAITING = 'OwnerRefsGateWaiting';
export const REASON_GATE_FAILED = 'OwnerRefsGateFailed';
export const REASON_GATE_UNRESOLVED = 'OwnerRefsGateUnresolved';

/** Chain ends the lifter waits out (the pod stays gated): the answer may yet come. */
const WAIT_FOR: ReadonlySet<ChainEnd> = new Set(['Pending', 'Unavailable']);

/** A pod as the watch sends it: read defensively, any author may have written it. */
export interface WatchedPod {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; ownerReferences?: OwnerReference[]; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec?: { schedulingGates?: { name?: string }[] } & Record<string, unknown>;
}

/** What the lifter keeps of a gated pod: enough to patch it, and the chain keys its spec reads (not the spec). */
interface Gated {
  namespace: string;
  name: string;
  uid: string;
  owners: OwnerReference[];
  annotations: Record<string, string> | undefined;
  labelled: boolean;
  /** The gate's index in spec.schedulingGates. */
  gateAt: number;
  reads: AnnotationKey[];
}

/** The outcome of one run, for metrics: lifted, waiting (the chain did not settle), gone, conflict, failed. */
export type LiftResult = 'lifted' | 'waiting' | 'gone' | 'conflict' | 'failed';

export interface GateLifterOptions {
  client: Pick<ApiClient, 'json'>;
  events: EventSink;
  log: Logger;
  /** The pod's chain as far as its owners could be read (AdmissionChains.resolve). */
  chain(namespace: string, owners: readonly OwnerReference[]): Promise<ControllerChain>;
  observe?(result: LiftResult, seconds?: number): void;
  clock?: Clock;
  concurrency?: number;
}

const keyOf = (p: WatchedPod) => `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`;
/** JSON Pointer segment (RFC 6901). */
const seg = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');

/** The gated pod's part the lifter keeps, or undefined when it carries no gate of ours. */
function gated(p: WatchedPod): Gated | undefined {
  const m = p.metadata;
  const gateAt = (p.spec?.schedulingGates ?? []).findIndex((g) => g?.name === SCHEDULING_GATE);
  if (!m?.name || !m.namespace || !m.uid || gateAt < 0) return undefined;
  return {
    namespace: m.namespace, name: m.name, uid: m.uid, owners: Array.isArray(m.ownerReferences) ? m.ownerReferences : [],
    annotations: m.annotations, labelled: m.labels?.[GATED_LABEL] !== undefined, gateAt,
    reads: annotationsRead(p.spec).filter((k) => CHAIN_KEYS.has(k)),
  };
}

export class GateLifter implements ReflectorHandler<WatchedPod> {
  readonly #o: GateLifterOptions;
  readonly #clock: Clock;
  readonly #pods = new Map<string, Gated>();
  /** Pods told (one Warning Event each) why they still wait; forgotten with the pod. */
  readonly #told = new Set<string>();
  readonly #queue: WorkQueue;

  constructor(o: GateLifterOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
    this.#queue = new WorkQueue({ concurrency: o.concurrency ?? 4, process: (key) => this.#run(key), clock: this.#clock, retry: { initialMs: 1_000, maxMs: 60_000 } });
  }

  replace(items: WatchedPod[]): void {
    const seen = new Set(items.map(keyOf));
    for (const key of [...this.#pods.keys()]) if (!seen.has(key)) this.#forget(key);
    for (const p of items) this.upsert(p);
  }

  upsert(obj: WatchedPod): void {
    const key = keyOf(obj);
    const g = gated(obj);
    if (!g) return this.#forget(key);
    this.#pods.set(key, g);
    this.#queue.add(key);
  }

  remove(obj: WatchedPod): void {
    this.#forget(keyOf(obj));
  }

  /** Gated pods known now (a gauge). */
  get gated(): number {
    return this.#pods.size;
  }

  idle(): Promise<void> {
    return this.#queue.idle();
  }

  stop(): Promise<void> {
    return this.#queue.drain();
  }

  #forget(key: string): void {
    this.#pods.delete(key);
    this.#told.delete(key);
    this.#queue.forget(key);
  }

  async #run(key: string): Promise<void> {
    const pod = this.#pods.get(key);
    if (!pod) return;
    const { namespace, name, uid, owners, gateAt } = pod;
    const started = this.#clock.now();
    const chain = await this.#o.chain(namespace, owners);
    // Waits while the answer may yet come (an owner being read, or a read that failed); a
    // reader's lasting limit (Forbidden, a kind not served or not followed) is written as the
    // value, as the webhook writes it, and said in an Event: a pod is not held for a grant.
    if (WAIT_FOR.has(chain.end.reason)) {
      this.#o.observe?.('waiting');
      if (!this.#told.has(key)) {
        this.#told.add(key);
        const message = `the pod stays gated until its workload is known: ${chain.end.reason}: ${chain.end.message}`;
        this.#o.events.warn({ kind: 'Pod', namespace, name, uid }, REASON_GATE_WAITING, message);
        this.#o.log.warn({ [F.pod]: key, reason: chain.end.reason }, message);
      }
      this.#queue.retry(key);
      return;
    }
    if (!isSettled(chain) && !this.#told.has(key)) {
      this.#told.add(key);
      const message = `the workload's values say ${chain.end.reason}: ${chain.end.message}`;
      this.#o.events.warn({ kind: 'Pod', namespace, name, uid }, REASON_GATE_UNRESOLVED, message);
      this.#o.log.warn({ [F.pod]: key, reason: chain.end.reason }, message);
    }
    const changes = annotationChanges(pod.reads, owners, { chain }, pod.annotations);
    const ops: unknown[] = [
      { op: 'test', path: '/metadata/uid', value: uid },
      { op: 'test', path: `/spec/schedulingGates/${gateAt}/name`, value: SCHEDULING_GATE },
      ...changes.size > 0 && !pod.annotations ? [{ op: 'add', path: '/metadata/annotations', value: {} }] : [],
      ...[...changes].map(([k, v]) => ({ op: 'add', path: `/metadata/annotations/${seg(k)}`, value: v })),
      { op: 'remove', path: `/spec/schedulingGates/${gateAt}` },
      ...pod.labelled ? [{ op: 'remove', path: `/metadata/labels/${seg(GATED_LABEL)}` }] : [],
    ];
    try {
      await this.#o.client.json('PATCH', `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`, ops, 'application/json-patch+json');
      this.#o.observe?.('lifted', (this.#clock.now() - started) / 1000);
      this.#o.log.debug({ [F.pod]: key, annotations: changes.size }, 'gate lifted');
      this.#forget(key);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : undefined;
      if (status === 404) { this.#o.observe?.('gone'); return this.#forget(key); }
      // A failed test (the gate lifted by another, or moved) or a newer pod: the next event decides.
      if (status === 409 || status === 422) { this.#o.observe?.('conflict'); this.#queue.retry(key); return; }
      this.#o.observe?.('failed');
      const message = `could not write the workload's values and lift the scheduling gate: ${err instanceof Error ? err.message : String(err)}`;
      this.#o.events.warn({ kind: 'Pod', namespace, name, uid }, REASON_GATE_FAILED, message);
      this.#o.log.warn({ [F.pod]: key, [F.err]: String(err) }, message);
      this.#queue.retry(key);
    }
  }
}
