import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../../../agent/kube/client.ts';
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
