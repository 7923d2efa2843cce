import { describe, expect, it } from 'vitest';
import { ApiError, retryAfterMs, type ApiClient } from '../../../agent/kube/client.ts';
import { FakeClock } from '../../support/clock.ts';
import { ApiEventSink, cut, type InvolvedObject } from '../../../agent/kube/events.ts';
import { memoryLogger } from '../../support/agentkit.ts';
import { waitFor } from '../../../localcluster/wait.ts';

/** An API server that holds every POST until released, recording what was posted. */
function slowApi() {
  const posted: { path: string; body: { involvedObject: { name: string }; message: string; type: string; reason: string } }[] = [];
  const held: (() => void)[] = [];
  const api: ApiClient = {
    json: (_m, path, body) => new Promise((resolve) => {
      posted.push({ path, body: body as never });
      held.push(() => resolve(undefined as never));
    }),
    stream: () => Promise.reject(new Error('not used')),
  };
  return { api, posted, releaseAll: () => { for (const r of held.splice(0)) r(); } };
}

const pod = (i: number): InvolvedObject => ({ kind: 'Pod', name: `bad-${i}`, namespace: 'ns', uid: `uid-${i}` });

describe('ApiEventSink', () => {
  it('gives each of many misconfigured pods its first Event, however many fail at once', async () => {
    const { api, posted, releaseAll } = slowApi();
    const sink = new ApiEventSink({ client: api, node: 'n1', log: memoryLogger().log });
    const accepted = Array.from({ length: 40 }, (_, i) => sink.warn(pod(i), 'OwnerRefsProjectionFailed', `pod ${i} is wrong`));
    expect(accepted.every(Boolean)).toBe(true);
    expect(posted).toHaveLength(16); // at most this many in flight
    // The API server answers; the waiting Events follow.
    await waitFor(() => {
      releaseAll();
      return posted.length === 40;
    });
    expect(new Set(posted.map((p) => p.body.involvedObject.name)).size).toBe(40);
    expect(posted[0]).toMatchObject({ path: '/api/v1/namespaces/ns/events', body: { type: 'Warning', reason: 'OwnerRefsProjectionFailed', message: 'pod 0 is wrong' } });
  });

  it('still limits one object: a burst, then the rest refused and counted with the next one', () => {
    const { api, posted } = slowApi();
    const sink = new ApiEventSink({ client: api, node: 'n1', log: memoryLogger().log });
    const results = Array.from({ length: 5 }, () => sink.warn(pod(1), 'R', 'again'));
    expect(results).toEqual([true, true, true, false, false]);
    expect(posted).toHaveLength(3);
  });

  it('drops, and says so, only past its queue bound: a flood no per-object limit stopped', () => {
    const { api } = slowApi();
    const sink = new ApiEventSink({ client: api, node: 'n1', log: memoryLogger().log });
    const results = Array.from({ length: 1_100 }, (_, i) => sink.warn(pod(i), 'R', 'x'));
    expect(results.filter(Boolean)).toHaveLength(1_016); // 16 in flight + 1,000 waiting
    expect(results.at(-1)).toBe(false);
  });
});

/** An API server that answers each POST with the next scripted outcome (an error, or success when the script is empty). */
function scriptedApi(outcomes: unknown[]) {
  let posts = 0;
  const api: ApiClient = {
    json: () => {
      posts++;
      const o = outcomes.shift();
      return o === undefined ? Promise.resolve(undefined as never) : Promise.reject(o);
    },
    stream: () => Promise.reject(new Error('not used')),
  };
  return { api, posts: () => posts };
}
const flush = async () => { for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0)); };

describe('ApiEventSink when the API server refuses for a moment', () => {
  it('posts again after the server\'s Retry-After (a 429 from priority and fairness) and after a 503, then succeeds', async () => {
    const clock = new FakeClock();
    const s = scriptedApi([new ApiError(429, 'TooManyRequests', 'slow down', undefined, undefined, 7_000), new ApiError(503, 'ServiceUnavailable', 'x')]);
    const { log, lines } = memoryLogger();
    const sink = new ApiEventSink({ client: s.api, node: 'n1', log, clock, random: () => 1 });
    sink.warn(pod(1), 'R', 'm');
    await flush();
    expect(s.posts()).toBe(1);
    clock.advance(6_999); // the backoff alone would be 2 s: the server asked for 7
    await flush();
    expect(s.posts()).toBe(1);
    clock.advance(1);
    await flush();
    expect(s.posts()).toBe(2);
    clock.advance(4_000); // the second retry: 2 s doubled
    await flush();
    expect(s.posts()).toBe(3);
    expect(lines.filter((l) => l.msg === 'could not record event')).toEqual([]);
  });

  it('gives up after three tries, logging once; and never retries what the server refuses for good (403, 422)', async () => {
    const clock = new FakeClock();
    const busy = () => new ApiError(503, 'ServiceUnavailable', 'x');
    const s = scriptedApi([busy(), busy(), busy(), new ApiError(422, 'Invalid', 'bad')]);
    const { log, lines } = memoryLogger();
    const sink = new ApiEventSink({ client: s.api, node: 'n1', log, clock, random: () => 1 });
    sink.warn(pod(1), 'R', 'm');
    for (let i = 0; i < 10; i++) {
      clock.advance(10_000);
      await flush();
    }
    expect(s.posts()).toBe(3);
    sink.warn(pod(2), 'R', 'm');
    for (let i = 0; i < 10; i++) {
      clock.advance(10_000);
      await flush();
    }
    expect(s.posts()).toBe(4);
    expect(lines.filter((l) => l.msg === 'could not record event').map((l) => l.attempts)).toEqual([3, 1]);
  });

  it('gives up the retries waiting when it is closed', async () => {
    const clock = new FakeClock();
    const s = scriptedApi([new ApiError(503, 'ServiceUnavailable', 'x')]);
    const sink = new ApiEventSink({ client: s.api, node: 'n1', log: memoryLogger().log, clock });
    sink.warn(pod(1), 'R', 'm');
    await flush();
    sink.close();
    clock.advance(60_000);
    await flush();
    expect(s.posts()).toBe(1);
  });
});

describe('retryAfterMs', () => {
  it.each([['1', 1_000], [' 30 ', 30_000], ['100000', 600_000], ['Wed, 21 Oct 2015 07:28:00 GMT', undefined], ['-1', undefined], [undefined, undefined]])(
    'reads %j as %j', (header, ms) => expect(retryAfterMs(header)).toBe(ms));
});

describe('cut (Event messages)', () => {
  it.each([
    ['a message that fits, unchanged', 'short', 10, 'short'],
    ['a long one, cut and marked', 'abcdefghijkl', 10, 'abcdefghi…'],
    ['never half of a surrogate pair', `${'a'.repeat(8)}\u{1F600}xyz`, 10, `${'a'.repeat(8)}…`],
  ])('%s', (_what, s, max, want) => {
    const got = cut(s, max);
    expect(got).toBe(want);
    expect(got.length).toBeLessThanOrEqual(max);
    expect(got.isWellFormed()).toBe(true);
  });
});
