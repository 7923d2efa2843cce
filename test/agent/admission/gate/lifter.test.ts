import { describe, expect, it } from 'vitest';
import { GateLifter, REASON_GATE_FAILED, REASON_GATE_UNRESOLVED, REASON_GATE_WAITING, type LiftResult, type WatchedPod } from '../../../../agent/admission/gate/lifter.ts';
import { ApiError } from '../../../../agent/kube/client.ts';
import type { ControllerChain } from '../../../../projections/chain.ts';
import { ANNOTATIONS, GATED_LABEL, SCHEDULING_GATE, annotationField } from '../../../../projections/names.ts';
import type { OwnerReference } from '../../../../projections/types.ts';
import { memoryLogger, RecordingEvents } from '../../../support/agentkit.ts';
import { FakeClock } from '../../../support/clock.ts';

const RS: OwnerReference = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d4b9', uid: 'rs-uid', controller: true };
const DEPLOY: OwnerReference = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'deploy-uid', controller: true };
const SETTLED: ControllerChain = { items: [RS, DEPLOY], end: { reason: 'Top', message: 'Deployment web has no controller' } } as ControllerChain;
const PENDING: ControllerChain = { items: [RS], end: { reason: 'Pending', message: 'reading ReplicaSet web-7d4b9' } } as ControllerChain;

const readsEnv = (key: string) => ({ name: 'E', valueFrom: { fieldRef: { fieldPath: annotationField(key) } } });

/** A pod as the watch sends it: gated (by default) and labelled, reading `keys`. */
function pod(over: { name?: string; keys?: string[]; gates?: string[]; annotations?: Record<string, string>; labelled?: boolean } = {}): WatchedPod {
  const name = over.name ?? 'p';
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, ownerReferences: [RS], ...over.annotations ? { annotations: over.annotations } : {},
      ...over.labelled === false ? {} : { labels: { app: 'web', [GATED_LABEL]: '' } } },
    spec: { schedulingGates: (over.gates ?? [SCHEDULING_GATE]).map((g) => ({ name: g })), containers: [{ name: 'c', env: (over.keys ?? [ANNOTATIONS.workloadName]).map(readsEnv) }] },
  };
}

interface Sent { path: string; ops: { op: string; path: string; value?: unknown }[]; contentType?: string }

function kit(chain: (owners: readonly OwnerReference[]) => ControllerChain = () => SETTLED) {
  const clock = new FakeClock();
  const sent: Sent[] = [];
  let answer: () => Promise<unknown> = async () => ({});
  const results: LiftResult[] = [];
  const events = new RecordingEvents();
  const { log, lines } = memoryLogger();
  const lifter = new GateLifter({
    client: { json: async (_m: string, path: string, body?: unknown, contentType?: string) => { sent.push({ path, ops: body as Sent['ops'], contentType }); return answer(); } } as never,
    events, log, clock, chain: async (_ns, owners) => chain(owners), observe: (r) => results.push(r),
  });
  return { clock, sent, events, lines, lifter, results, answer: (fn: typeof answer) => { answer = fn; }, settle: () => lifter.idle() };
}

describe('GateLifter', () => {
  it('writes the chain values a gated pod reads and lifts the gate and the label in one JSON PATCH, guarded by the uid and the gate', async () => {
    const k = kit();
    k.lifter.upsert(pod({ keys: [ANNOTATIONS.workloadName, ANNOTATIONS.workloadUid, ANNOTATIONS.ownerReferences], gates: ['other.example/x', SCHEDULING_GATE], annotations: { keep: 'x' } }));
    await k.settle();
    expect(k.sent).toEqual([{ path: '/api/v1/namespaces/ns/pods/p', contentType: 'application/json-patch+json', ops: [
      { op: 'test', path: '/metadata/uid', value: 'uid-p' },
      { op: 'test', path: '/spec/schedulingGates/1/name', value: SCHEDULING_GATE },
      { op: 'add', path: '/metadata/annotations/ownerrefs.dev~1workload-name', value: 'web' },
      { op: 'add', path: '/metadata/annotations/ownerrefs.dev~1workload-uid', value: 'deploy-uid' },
      { op: 'remove', path: '/spec/schedulingGates/1' },
      { op: 'remove', path: '/metadata/labels/ownerrefs.dev~1gated' },
    ] }]);
    expect(k.results).toEqual(['lifted']);
    expect(k.lifter.gated).toBe(0);
  });

  it.each([
    ['no annotations yet: the map is made first', undefined, [{ op: 'add', path: '/metadata/annotations', value: {} }]],
    ['annotations already there', { a: 'b' }, []],
  ])('%s', async (_what, annotations, first) => {
    const k = kit();
    k.lifter.upsert(pod({ annotations }));
    await k.settle();
    expect(k.sent[0]!.ops.slice(2, 2 + first.length)).toEqual(first);
  });

  it('lifts the gate without a label to remove when someone removed the label first', async () => {
    const k = kit();
    k.lifter.upsert(pod({ labelled: false }));
    await k.settle();
    expect(k.sent[0]!.ops.at(-1)).toEqual({ op: 'remove', path: '/spec/schedulingGates/0' });
  });

  it.each([
    ['no gate of ours (lifted already, or only another\'s)', ['other.example/x']],
    ['no gates at all', []],
  ])('leaves a pod with %s alone', async (_what, gates) => {
    const k = kit();
    k.lifter.upsert(pod({ gates }));
    await k.settle();
    expect(k.sent).toEqual([]);
    expect(k.lifter.gated).toBe(0);
  });

  it('keeps a pod whose chain has not settled gated, says why once in an Event and a log line, and lifts it once the owner is read', async () => {
    let chain = PENDING;
    const k = kit(() => chain);
    k.lifter.upsert(pod());
    await k.settle();
    expect(k.sent).toEqual([]);
    k.clock.advance(1_000);
    await k.settle();
    expect(k.events.sent.map((e) => [e.obj.name, e.reason])).toEqual([['p', REASON_GATE_WAITING]]);
    expect(k.events.sent[0]!.message).toMatch(/stays gated until its workload is known: Pending: reading ReplicaSet web-7d4b9/);
    expect(k.lines.filter((l) => l.reason === 'Pending')).toHaveLength(1);
    chain = SETTLED;
    k.clock.advance(60_000);
    await k.settle();
    expect(k.sent).toHaveLength(1);
    expect(k.results).toEqual(['waiting', 'waiting', 'lifted']);
  });

  it.each([
    [404, 'gone', 0, 0],
    [409, 'conflict', 0, 1],
    [422, 'conflict', 0, 1],
    [500, 'failed', 1, 1],
    [403, 'failed', 1, 1],
  ])('a PATCH answered %i: %s, %i Event(s), %i still tracked', async (status, result, events, tracked) => {
    const k = kit();
    k.answer(async () => { throw new ApiError(status, 'X', `status ${status}`); });
    k.lifter.upsert(pod());
    await k.settle();
    expect(k.results).toEqual([result]);
    expect(k.events.sent.map((e) => e.reason)).toEqual(Array(events).fill(REASON_GATE_FAILED));
    expect(k.lifter.gated).toBe(tracked);
  });

  it('retries a failed PATCH with backoff from the newest view, and never sends a remove of an annotation', async () => {
    const k = kit();
    let fail = true;
    k.answer(async () => { if (fail) throw new ApiError(500, 'InternalError', 'etcd away'); return {}; });
    k.lifter.upsert(pod());
    await k.settle();
    fail = false;
    k.lifter.upsert(pod({ annotations: { [ANNOTATIONS.workloadName]: 'web' } }));
    await k.settle();
    k.clock.advance(2_000);
    await k.settle();
    expect(k.results).toEqual(['failed', 'lifted']);
    // The newest view already has the value: only the gate and the label are left to change.
    expect(k.sent.at(-1)!.ops.filter((o) => o.op !== 'test')).toEqual([
      { op: 'remove', path: '/spec/schedulingGates/0' }, { op: 'remove', path: '/metadata/labels/ownerrefs.dev~1gated' }]);
    expect(k.sent.flatMap((s) => s.ops).filter((o) => o.op === 'remove' && o.path.startsWith('/metadata/annotations'))).toEqual([]);
  });

  it('forgets pods a relist no longer has, and pods deleted', async () => {
    const k = kit(() => PENDING);
    k.lifter.replace([pod({ name: 'a' }), pod({ name: 'b' })]);
    await k.settle();
    expect(k.lifter.gated).toBe(2);
    k.lifter.replace([pod({ name: 'a' })]);
    expect(k.lifter.gated).toBe(1);
    k.lifter.remove(pod({ name: 'a' }));
    expect(k.lifter.gated).toBe(0);
  });
});

describe('GateLifter, a chain this reader cannot finish', () => {
  it.each(['Forbidden', 'NotServed', 'KindNotFollowed'] as const)('%s: lifts the gate with the value the webhook would write, and says why in an Event', async (reason) => {
    const k = kit(() => ({ items: [RS], end: { reason, message: `ReplicaSet web-7d4b9: ${reason}` } }) as ControllerChain);
    k.lifter.upsert(pod());
    await k.settle();
    expect(k.sent[0]!.ops).toContainEqual({ op: 'add', path: '/metadata/annotations/ownerrefs.dev~1workload-name', value: `(unresolved: ${reason})` });
    expect(k.events.sent.map((e) => e.reason)).toEqual([REASON_GATE_UNRESOLVED]);
  });
});
