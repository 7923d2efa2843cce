import { describe, expect, it } from 'vitest';
import type { Clock } from '../../../agent/common/clock.ts';
import { ProjectionError } from '../../../agent/common/errors.ts';
import type { EventSink, InvolvedObject } from '../../../agent/kube/events.ts';
import { AgentMetrics } from '../../../agent/monitoring/metrics.ts';
import { FailureReporter } from '../../../agent/files/reporter.ts';
import { memoryLogger, RecordingEvents } from '../../support/agentkit.ts';

const POD: InvolvedObject = { kind: 'Pod', name: 'web-1', namespace: 'shop', uid: 'uid-1' };

function reporter(events: EventSink = new RecordingEvents()) {
  let now = 0;
  const clock: Clock = { now: () => now, setTimer: () => () => {} };
  const { log, lines } = memoryLogger();
  const metrics = new AgentMetrics({ processMetrics: false });
  const r = new FailureReporter({ log, events, metrics, clock });
  const value = async (name: string, labels: Record<string, string> = {}) =>
    (await metrics.registry.getSingleMetric(name)!.get()).values.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
      .reduce((n, v) => n + v.value, 0);
  return { r, lines, value, advance: (ms: number) => (now += ms) };
}

describe('FailureReporter', () => {
  it('counts the failure by reason, logs it once with the pod and volume, and sends a Warning Event', async () => {
    const events = new RecordingEvents();
    const { r, lines, value } = reporter(events);
    r.report(POD, new ProjectionError('WriteFailed', 'writing ownerReferences failed: ENOSPC', { pod: 'shop/web-1', volume: 'podinfo', file: 'ownerReferences' }));
    expect(await value('ownerrefs_projection_failures_total', { reason: 'WriteFailed' })).toBe(1);
    expect(lines).toEqual([expect.objectContaining({
      msg: 'writing ownerReferences failed: ENOSPC', pod: 'shop/web-1', podUID: 'uid-1', volume: 'podinfo', file: 'ownerReferences', reason: 'WriteFailed',
    })]);
    expect(events.sent).toEqual([{ obj: POD, reason: 'OwnerRefsProjectionFailed', message: 'WriteFailed: volume "podinfo": writing ownerReferences failed: ENOSPC' }]);
  });

  it('logs one bounded line: a refusal without its own stack, a write failure with the error behind it', () => {
    const { r, lines } = reporter();
    r.report(POD, new ProjectionError('InvalidDownwardAPI', `downwardAPI: ${'x'.repeat(10_000)}`));
    const cause = Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    r.report({ ...POD, uid: 'uid-2' }, new ProjectionError('WriteFailed', 'writing ownerReferences failed: ENOSPC', {}, cause));
    expect(lines[0]!.err).toBeUndefined();
    expect(JSON.stringify(lines[0]).length).toBeLessThan(2_400);
    expect(lines[0]!.msg).toMatch(/…\(10013 chars\)$/);
    expect(lines[1]!.err).toMatchObject({ message: 'ENOSPC: no space left on device', code: 'ENOSPC' });
  });

  it('logs a burst per pod, then one a minute carrying how many it suppressed', () => {
    const { r, lines, advance } = reporter();
    for (let i = 0; i < 10; i++) r.report(POD, new ProjectionError('NameTaken', `attempt ${i}`));
    expect(lines.map((l) => l.msg)).toEqual(['attempt 0', 'attempt 1', 'attempt 2']);
    advance(60_000);
    r.report(POD, new ProjectionError('NameTaken', 'after a minute'));
    expect(lines.at(-1)).toMatchObject({ msg: 'after a minute', suppressed: 7 });
  });

  it('limits each pod on its own: one noisy pod does not silence another', () => {
    const { r, lines } = reporter();
    for (let i = 0; i < 10; i++) r.report(POD, new ProjectionError('NameTaken', 'noisy'));
    r.report({ ...POD, name: 'quiet', uid: 'uid-2' }, new ProjectionError('TooLarge', 'quiet'));
    expect(lines.filter((l) => l.msg === 'quiet')).toHaveLength(1);
  });

  it('counts an Event the sink refused', async () => {
    const { r, value } = reporter({ warn: () => false });
    r.report(POD, new ProjectionError('TooLarge', 'too large'));
    expect(await value('ownerrefs_events_dropped_total')).toBe(1);
  });

  it('starts a pod over once it is forgotten (the pod left the node)', () => {
    const { r, lines } = reporter();
    for (let i = 0; i < 5; i++) r.report(POD, new ProjectionError('NameTaken', 'x'));
    r.forget('uid-1');
    r.report(POD, new ProjectionError('NameTaken', 'again'));
    expect(lines.at(-1)).toMatchObject({ msg: 'again' });
    expect(lines.at(-1)?.suppressed).toBeUndefined();
  });
});
