import { describe, expect, it } from 'vitest';
import { AnnotationKeeper, REASON_ANNOTATION_FAILED } from '../../../agent/annotations/keeper.ts';
import { ApiError } from '../../../agent/kube/client.ts';
import { DEFAULT_SETTINGS } from '../../../agent/node/nodeconfig.ts';
import { AgentMetrics } from '../../../agent/monitoring/metrics.ts';

import { renderOwnerReferencesJson } from '../../../projections/ownerreferences.ts';
import type { OwnerReference } from '../../../projections/types.ts';
import { memoryLogger, RecordingEvents } from '../../support/agentkit.ts';
import { FakeClock } from '../../support/clock.ts';
import { KEP_OWNERS } from '../../support/fixtures.ts';
import { type PodView } from '../../../agent/node/podview.ts';

const O = 'ownerrefs.dev/owner-references';
const N = 'ownerrefs.dev/node-owner-references';
const reads = (key: string) => ({ name: 'E', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${key}']` } } });

interface Patch { path: string; body: { metadata: { uid: string; resourceVersion?: string; annotations: Record<string, string | null> } } }

/** A keeper over a fake API: PATCHes are recorded and answered by `answer` (default 200). */
function kit(opts: { qps?: number } = {}) {
  const clock = new FakeClock();
  const patches: Patch[] = [];
  const gets: string[] = [];
  let answer: (p: Patch) => Promise<unknown> = async () => ({});
  let getAnswer: (path: string) => Promise<unknown> = async () => { throw new ApiError(500, 'InternalError', 'no GET expected'); };
  const events = new RecordingEvents();
  const { log, lines } = memoryLogger();
  const metrics = new AgentMetrics({ processMetrics: false });
  const keeper = new AnnotationKeeper({
    client: { json: async (method: string, path: string, body?: unknown) => {
      if (method === 'GET') { gets.push(path); return getAnswer(path); }
      const p = { path, body } as Patch;
      patches.push(p);
      return answer(p);
    } } as never,
    events, log, metrics, clock, random: () => 0, ...(opts.qps ? { qps: opts.qps } : {}),
  });
  keeper.setSettings(DEFAULT_SETTINGS);
  const writes = async (result: string) => (await metrics.annotationWrites.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
  const refusals = async () => (await metrics.annotationRefusals.get()).values.map((v) => ({ ...v.labels, n: v.value }));
  const metricsPods = async () => (await metrics.annotationPods.get()).values[0]?.value ?? 0;
  return { clock, patches, gets, events, lines, keeper, writes, refusals, metricsPods, answer: (fn: typeof answer) => { answer = fn; }, onGet: (fn: typeof getAnswer) => { getAnswer = fn; },
    settle: () => keeper.idle() };
}

let rv = 100;
function pod(over: { uid?: string; owners?: OwnerReference[]; annotations?: Record<string, string>; keys?: string[]; phase?: string; deleting?: boolean } = {}): PodView {
  return {
    metadata: { name: `p-${over.uid ?? 'u1'}`, namespace: 'ns', uid: over.uid ?? 'u1', resourceVersion: String(rv++), ownerReferences: over.owners ?? [KEP_OWNERS[0]!],
      annotations: over.annotations ?? {}, ...(over.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}) },
    spec: { containers: [{ name: 'c', env: (over.keys ?? [O]).map(reads) }] },
    ...(over.phase ? { status: { phase: over.phase } } : {}),
  } as unknown as PodView;
}
const kepOf = (owners: OwnerReference[]) => renderOwnerReferencesJson(owners);

describe('AnnotationKeeper', () => {
  it('writes nothing for a pod whose annotation admission set right (no request per pod creation)', async () => {
    const k = kit();
    k.keeper.upsert(pod({ annotations: { [O]: kepOf([KEP_OWNERS[0]!]) } }));
    await k.settle();
    expect(k.patches).toEqual([]);
  });

  it('on an ownership change sends one merge PATCH of that annotation alone, with the uid and resourceVersion as preconditions, and ignores its echo', async () => {
    const k = kit();
    const orphaned = pod({ owners: [], annotations: { [O]: kepOf([KEP_OWNERS[0]!]), other: 'x' } });
    k.keeper.upsert(orphaned);
    await k.settle();
    expect(k.patches).toEqual([{ path: '/api/v1/namespaces/ns/pods/p-u1',
      body: { metadata: { uid: 'u1', resourceVersion: orphaned.metadata!.resourceVersion, annotations: { [O]: kepOf([]) } } } }]);
    k.keeper.upsert(pod({ owners: [], annotations: { [O]: kepOf([]), other: 'x' } })); // the echo
    await k.settle();
    expect(k.patches).toHaveLength(1);
    expect(await k.writes('ok')).toBe(1);
  });

  it('runs a conflict again at once from the newer version the watch brought, never the view it was computed from', async () => {
    const k = kit();
    k.answer(async () => {
      k.answer(async () => ({}));
      k.keeper.upsert(newer); // the watch event of the change that made the PATCH conflict, while it was in flight
      throw new ApiError(409, 'Conflict', 'the object has been modified');
    });
    const newer = pod({ owners: [KEP_OWNERS[1]!] });
    k.keeper.upsert(pod({ owners: [] }));
    await k.settle();
    expect(await k.writes('conflict')).toBe(1);
    expect(k.gets).toEqual([]);
    expect(k.patches.at(-1)!.body.metadata).toEqual({ uid: 'u1', resourceVersion: newer.metadata!.resourceVersion, annotations: { [O]: kepOf([KEP_OWNERS[1]!]) } });
    const before = k.patches.length;
    k.clock.advance(120_000); // no retry left behind
    await k.settle();
    expect(k.patches).toHaveLength(before);
  });

  it('runs a conflict again at once from one GET when no watch event came, with no backoff', async () => {
    const k = kit();
    const stale = pod({ owners: [] });
    const current = pod({ owners: [] }); // the same owners, a newer version (the kubelet's status, say)
    k.answer(async (p) => {
      if (p.body.metadata.resourceVersion === stale.metadata!.resourceVersion) throw new ApiError(409, 'Conflict', 'the object has been modified');
      return { metadata: { annotations: p.body.metadata.annotations } };
    });
    k.onGet(async () => current);
    k.keeper.upsert(stale);
    await k.settle();
    expect(k.gets).toEqual(['/api/v1/namespaces/ns/pods/p-u1']);
    expect(k.patches.map((p) => p.body.metadata.resourceVersion)).toEqual([stale.metadata!.resourceVersion, current.metadata!.resourceVersion]);
    expect({ conflict: await k.writes('conflict'), ok: await k.writes('ok') }).toEqual({ conflict: 1, ok: 1 });
  });

  it('after a conflict, forgets a pod the GET finds gone or replaced by another of its name', async () => {
    for (const found of [async () => { throw new ApiError(404, 'NotFound', 'gone'); }, async () => pod({ uid: 'other' })]) {
      const k = kit();
      k.answer(async () => { throw new ApiError(409, 'Conflict', 'the object has been modified'); });
      k.onGet(found);
      k.keeper.upsert(pod({ owners: [] }));
      await k.settle();
      k.clock.advance(120_000);
      await k.settle();
      expect(k.patches).toHaveLength(1);
    }
  });

  it('reports a refusal (the policy, RBAC) as a Warning Event and a log line, and retries with backoff', async () => {
    const k = kit();
    k.answer(async () => { throw new ApiError(403, 'Forbidden', 'API 403 Forbidden: pods "p-u1" is forbidden: ValidatingAdmissionPolicy \'ownerrefs-agent.ownerrefs.dev\' with binding \'ownerrefs-agent.ownerrefs.dev\' denied request: the ownerrefs agent may change only pods bound to the node named in its own service account token'); });
    k.keeper.upsert(pod({ owners: [] }));
    await k.settle();
    expect(k.events.sent).toEqual([{ obj: expect.objectContaining({ kind: 'Pod', name: 'p-u1', uid: 'u1' }), reason: REASON_ANNOTATION_FAILED,
      message: expect.stringMatching(/^could not set ownerrefs.dev\/owner-references: API 403 Forbidden: .* denied request: the ownerrefs agent may change only pods bound to the node/) }]);
    expect(k.lines.filter((l) => l.reason === REASON_ANNOTATION_FAILED)).toHaveLength(1);
    k.clock.advance(1_000);
    await k.settle();
    expect(k.patches.length).toBe(2);
    expect(await k.writes('forbidden')).toBe(2);
    // Who refused, and why, for doctor (which reads only /metrics).
    expect(await k.refusals()).toEqual([{ by: 'ValidatingAdmissionPolicy ownerrefs-agent.ownerrefs.dev',
      reason: 'the ownerrefs agent may change only pods bound to the node named in its own service account token', n: 2 }]);
  });

  it.each([
    { what: 'its validation refuses the value (422: the pod\'s annotations are full)', status: 422, reason: 'Invalid', message: 'metadata.annotations: Too long: must have at most 262144 bytes',
      result: 'invalid', says: /^could not set ownerrefs\.dev\/owner-references \(the pod's annotations are full: .*\): .*Too long/, by: 'other' },
    { what: 'a policy engine refuses with a 400 (Kyverno\'s Enforce)', status: 400, reason: 'BadRequest', message: 'admission webhook "validate.kyverno.svc-fail" denied the request: policy require-labels',
      result: 'refused', says: /^could not set ownerrefs\.dev\/owner-references: .*validate\.kyverno\.svc-fail/, by: 'webhook validate.kyverno.svc-fail' },
  ])('when $what: a Warning Event, a log line and who refused; retried with backoff, the pod kept', async ({ status, reason, message, result, says, by }) => {
    const k = kit();
    k.answer(async () => { throw new ApiError(status, reason, message); });
    k.keeper.upsert(pod({ owners: [] }));
    await k.settle();
    expect(k.events.sent).toEqual([{ obj: expect.objectContaining({ name: 'p-u1' }), reason: REASON_ANNOTATION_FAILED, message: expect.stringMatching(says) }]);
    expect(k.lines.filter((l) => l.reason === REASON_ANNOTATION_FAILED)).toHaveLength(1);
    expect(await k.refusals()).toEqual([{ by, reason: '', n: 1 }]);
    k.clock.advance(1_000);
    await k.settle();
    expect({ patches: k.patches.length, [result]: await k.writes(result) }).toEqual({ patches: 2, [result]: 2 });
    k.answer(async () => ({}));
    k.clock.advance(120_000);
    await k.settle();
    expect(await k.writes('ok')).toBe(1);
  });

  it('a write answered 2xx whose stored value is not the one sent (a mutating webhook put another back): an Event, retried with backoff, and the echo does not cut it short', async () => {
    const k = kit();
    const old = kepOf([KEP_OWNERS[0]!]);
    k.answer(async () => ({ metadata: { annotations: { [O]: old } } }));
    k.keeper.upsert(pod({ owners: [], annotations: { [O]: old } }));
    await k.settle();
    expect(await k.writes('overridden')).toBe(1);
    expect(k.events.sent.map((e) => e.message)).toEqual([expect.stringMatching(/^could not keep ownerrefs\.dev\/owner-references \(stored "{.*"\): the API server answered .* exempt the agent's ServiceAccount/)]);
    expect(await k.refusals()).toEqual([{ by: 'mutating admission', reason: '', n: 1 }]);
    k.keeper.upsert(pod({ owners: [], annotations: { [O]: old, stamped: '1' } })); // the mutator's own change comes back as news
    await k.settle();
    expect(k.patches).toHaveLength(1);
    k.answer(async (p) => ({ metadata: { annotations: p.body.metadata.annotations } }));
    k.clock.advance(1_000);
    await k.settle();
    expect({ patches: k.patches.length, ok: await k.writes('ok') }).toEqual({ patches: 2, ok: 1 });
  });

  it('removes ours that a pod carries but does not read (a value no admission wrote), keeps the author\'s other keys, then forgets it', async () => {
    const k = kit();
    k.answer(async (p) => ({ metadata: { annotations: { ...Object.fromEntries(Object.entries(p.body.metadata.annotations).filter(([, v]) => v !== null)) } } }));
    const forged = pod({ keys: [], annotations: { 'ownerrefs.dev/workload-name': 'payments', 'ownerrefs.dev/volume': 'podinfo', 'ownerrefs.dev/team': 'mine', [N]: 'x' } });
    k.keeper.upsert(forged);
    await k.settle();
    expect(k.patches.map((p) => p.body.metadata)).toEqual([{ uid: 'u1', resourceVersion: forged.metadata!.resourceVersion, annotations: { 'ownerrefs.dev/workload-name': null, [N]: null } }]);
    expect(await k.writes('ok')).toBe(1);
    k.keeper.upsert(pod({ keys: [], annotations: { 'ownerrefs.dev/volume': 'podinfo', 'ownerrefs.dev/team': 'mine' } })); // the echo
    await k.settle();
    expect(k.patches).toHaveLength(1);
    expect((await k.metricsPods())).toBe(0);
  });

  it('removes one it does not read beside setting one it does, in one PATCH', async () => {
    const k = kit();
    k.keeper.upsert(pod({ owners: [], annotations: { [O]: kepOf([KEP_OWNERS[0]!]), 'ownerrefs.dev/controller-uid': 'forged' } }));
    await k.settle();
    expect(k.patches.map((p) => p.body.metadata.annotations)).toEqual([{ [O]: kepOf([]), 'ownerrefs.dev/controller-uid': null }]);
  });

  it('forgets a pod the API server no longer has (404), and one that stops reading our annotations', async () => {
    const k = kit();
    k.answer(async () => { throw new ApiError(404, 'NotFound', 'gone'); });
    k.keeper.upsert(pod({ owners: [] }));
    await k.settle();
    k.clock.advance(120_000);
    await k.settle();
    expect(k.patches).toHaveLength(1);
    k.answer(async () => ({}));
    k.keeper.upsert(pod({ uid: 'u2', owners: [], keys: [] }));
    await k.settle();
    expect(k.patches).toHaveLength(1);
  });

  it('bounds its write rate per node: the burst at once, the rest one per 1/qps', async () => {
    const k = kit({ qps: 2 }); // burst 10
    for (let i = 0; i < 14; i++) k.keeper.upsert(pod({ uid: `u${i}`, owners: [] }));
    await k.settle();
    expect(k.patches).toHaveLength(10);
    k.clock.advance(1_000);
    await k.settle();
    expect(k.patches).toHaveLength(12);
    k.clock.advance(1_000);
    await k.settle();
    expect(k.patches).toHaveLength(14);
  });

  it('on 429 (its APF level full) holds every write of the node for the Retry-After, then resumes from an empty budget without a grown backoff', async () => {
    const k = kit({ qps: 2 }); // burst 10, then one per 500 ms
    let refuse = 2;
    k.answer(async () => { if (refuse-- > 0) throw new ApiError(429, 'TooManyRequests', 'too many requests', undefined, undefined, 3_000); return {}; });
    for (let i = 0; i < 6; i++) k.keeper.upsert(pod({ uid: `u${i}`, owners: [] }));
    await k.settle();
    // Two refused: the other four went out before (ANNOTATION_CONCURRENCY in flight) or wait with them.
    const first = k.patches.length;
    expect(await k.writes('throttled')).toBe(2);
    k.keeper.upsert(pod({ uid: 'late', owners: [] }));
    k.clock.advance(2_999);
    await k.settle();
    expect(k.patches).toHaveLength(first); // nothing, the new pod included, during the hold
    k.clock.advance(1);
    await k.settle();
    k.clock.advance(500 * 7);
    await k.settle();
    expect(await k.writes('ok')).toBe(7); // every pod written, one per 500 ms after the hold
    expect(k.lines.filter((l) => Number(l.level) >= 40)).toEqual([]); // no warning, no Event: it is the server's pacing
    expect(k.events.sent).toEqual([]);
  });

  it('doubles the hold for each 429 in a row on the node (PATCHes sent after the last hold), and starts again from one after a success', async () => {
    const k = kit({ qps: 1_000 }); // the budget never binds but for the holds
    const answers = [429, 429, 429, 200, 429];
    k.answer(async () => { const a = answers.shift(); if (a === 429) throw new ApiError(429, 'TooManyRequests', 'too many requests'); return {}; });
    k.keeper.upsert(pod({ uid: 'a', owners: [] }));
    await k.settle();
    const at: number[] = [];
    let seen = k.patches.length;
    for (let t = 100; t <= 10_000; t += 100) {
      k.clock.advance(100);
      await k.settle();
      if (k.patches.length > seen) at.push(t);
      seen = k.patches.length;
    }
    // 429 at 0 (hold 1 s), again (2 s), again (4 s), then 200: each retry on the first
    // 100 ms tick after its hold (the bucket refills from empty).
    expect(at).toEqual([1_100, 3_200, 7_300]);
    k.keeper.upsert(pod({ uid: 'b', owners: [] })); // written at once: 429 again, held 1 s, not 8
    await k.settle();
    k.clock.advance(1_001);
    await k.settle();
    expect(await k.writes('ok')).toBe(2);
  });

  it('writes nothing while the node is paused, and catches up when it resumes', async () => {
    const k = kit();
    k.keeper.setSettings({ ...DEFAULT_SETTINGS, paused: true });
    k.keeper.upsert(pod({ owners: [] }));
    await k.settle();
    expect(k.patches).toEqual([]);
    k.keeper.setSettings(DEFAULT_SETTINGS);
    await k.settle();
    expect(k.patches).toHaveLength(1);
  });

  it.each([
    { what: 'a pod being deleted', p: () => pod({ owners: [], deleting: true }) },
    { what: 'a finished pod', p: () => pod({ owners: [], phase: 'Succeeded' }) },
  ])('leaves $what alone (the kubelet renders nothing for it any more)', async ({ p }) => {
    const k = kit();
    k.keeper.upsert(p());
    await k.settle();
    expect(k.patches).toEqual([]);
  });

  it('sets the Node\'s annotation once the Node is known, and again when it changes', async () => {
    const k = kit();
    k.keeper.upsert(pod({ keys: [N] }));
    await k.settle();
    expect(k.patches).toEqual([]);
    k.keeper.setNode({ name: 'n1', uid: 'node-1' });
    await k.settle();
    expect(k.patches.map((p) => p.body.metadata.annotations)).toEqual([{ [N]: '[{"apiVersion":"v1","kind":"Node","name":"n1","uid":"node-1"}]' }]);
  });
});
