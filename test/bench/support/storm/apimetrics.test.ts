import { describe, expect, it } from 'vitest';
import { apiWindow, histogramQuantile, increase, parseMetrics, quantileOfBuckets } from '../../../../bench/support/storm/apimetrics.ts';
import { annotatedOwners } from '../../../../bench/support/storm/tracker.ts';

const bucket = (le: string, n: number, labels = 'verb="PATCH",resource="pods",subresource=""') => `apiserver_request_duration_seconds_bucket{${labels},le="${le}"} ${n}`;

describe('quantileOfBuckets', () => {
  it.each([
    { what: 'interpolates within the bucket the rank falls in', buckets: [[0.1, 50], [0.2, 100]], q: 0.75, want: 0.15 },
    { what: 'starts the first bucket at zero', buckets: [[0.1, 100], [0.2, 100]], q: 0.5, want: 0.05 },
    { what: 'answers the last finite bound for ranks in +Inf', buckets: [[0.1, 10], [Infinity, 100]], q: 0.99, want: 0.1 },
    { what: 'skips empty buckets', buckets: [[0.1, 0], [0.2, 0], [0.4, 10]], q: 0.5, want: 0.3 },
    { what: 'is NaN when nothing was observed', buckets: [[0.1, 0], [Infinity, 0]], q: 0.5, want: NaN },
  ] as { what: string; buckets: [number, number][]; q: number; want: number }[])('$what', ({ buckets, q, want }) => {
    if (Number.isNaN(want)) expect(quantileOfBuckets(buckets, q)).toBeNaN();
    else expect(quantileOfBuckets(buckets, q)).toBeCloseTo(want, 9);
  });
});

describe('a window between two scrapes', () => {
  const a = parseMetrics([bucket('0.1', 10), bucket('0.2', 10), bucket('+Inf', 10), 'apiserver_request_total{verb="PATCH",resource="pods",subresource="",code="200"} 10',
    'apiserver_flowcontrol_dispatched_requests_total{flow_schema="x",priority_level="ownerrefs-agent-writes"} 5'].join('\n'));
  const b = parseMetrics(['# HELP ignored', bucket('0.1', 10), bucket('0.2', 110), bucket('+Inf', 110),
    'apiserver_request_total{verb="PATCH",resource="pods",subresource="",code="200"} 110', 'apiserver_request_total{verb="PATCH",resource="pods",subresource="status",code="200"} 999',
    'apiserver_flowcontrol_dispatched_requests_total{flow_schema="x",priority_level="ownerrefs-agent-writes"} 25',
    'apiserver_flowcontrol_rejected_requests_total{flow_schema="x",priority_level="ownerrefs-agent-writes",reason="queue-full"} 3'].join('\n'));

  it('counts only what happened in it: the buckets\' and counters\' increase, of the series asked for', () => {
    expect(increase(a, b, 'apiserver_request_total', 'subresource=""')).toBe(100);
    expect(histogramQuantile(a, b, 'apiserver_request_duration_seconds', 0.5, 'subresource=""')).toBeCloseTo(0.15, 9); // all 100 in (0.1, 0.2]
    expect(apiWindow(a, b, 10, ['ownerrefs-agent-writes', 'workload-low'])).toEqual({
      seconds: 10, podPatchesPerSecond: 10, podPatchMs: { p50: 150, p99: 199 }, requestsPerSecond: 109.9,
      levels: { 'ownerrefs-agent-writes': { dispatched: 20, rejected: 3, waitP99Ms: NaN }, 'workload-low': { dispatched: 0, rejected: 0, waitP99Ms: NaN } },
    });
  });
});

describe('annotatedOwners', () => {
  it.each([
    { value: '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[{"uid":"a"},{"uid":"b"}]}', want: ['a', 'b'] },
    { value: '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}', want: [] },
    { value: undefined, want: undefined },
    { value: 'Pending', want: undefined },
    { value: '{"items":"x"}', want: undefined },
  ])('reads $value as $want', ({ value, want }) => {
    expect(annotatedOwners(value)).toEqual(want);
  });
});
