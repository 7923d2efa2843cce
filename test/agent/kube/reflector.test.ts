import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { Backoff } from '../../../agent/common/clock.ts';
import { ApiError, type ApiClient } from '../../../agent/kube/client.ts';
import { RecoveryPacer } from '../../../agent/kube/pacer.ts';
import { Reflector } from '../../../agent/kube/reflector.ts';
import type { KubeObject, RestartReason } from '../../../agent/kube/reflectorcontract.ts';
import { waitFor } from '../../../localcluster/wait.ts';
import { FakeClock } from '../../support/clock.ts';

type Obj = KubeObject & { v?: number };
const obj = (name: string, rv: string): Obj => ({ metadata: { name, uid: name, resourceVersion: rv } });

/** An API double: lists come from `lists`; each watch opens a stream the test drives. */
class FakeApi implements ApiClient {
  lists: (() => { items: Obj[]; metadata: { resourceVersion: string } })[] = [];
  listPaths: string[] = [];
  watchPaths: string[] = [];
  streams: PassThrough[] = [];
  watchFailures: unknown[] = [];

  async json<T>(_m: string, path: string): Promise<T> {
    this.listPaths.push(path);
    const next = this.lists.shift();
    if (!next) throw new Error('no list scripted');
    return next() as T;
  }

  async stream(path: string, signal: AbortSignal): Promise<IncomingMessage> {
    this.watchPaths.push(path);
    const fail = this.watchFailures.shift();
    if (fail) throw fail;
    const s = new PassThrough();
    signal.addEventListener('abort', () => s.destroy(new Error('aborted')), { once: true });
    this.streams.push(s);
    return s as unknown as IncomingMessage;
  }

  send(type: string, object: unknown): void {
    this.streams.at(-1)!.write(JSON.stringify({ type, object }) + '\n');
  }
}

interface StartOptions {
  stallMs?: number;
  resetAfterMs?: number;
  pacer?: RecoveryPacer;
  timeoutSeconds?: [number, number];
  /** Default false here: the tests above the streamed-list block are about the watch loop. */
  streamLists?: boolean;
  clock?: FakeClock;
}

function start(api: FakeApi, opts: StartOptions = {}) {
  const seen = {
    replaced: [] as string[][], replacedItems: [] as Obj[][], upserts: [] as string[], removes: [] as string[],
    starts: [] as RestartReason[], relists: [] as RestartReason[], backoffs: [] as number[], refused: [] as number[], hows: [] as string[],
  };
  const r = new Reflector<Obj>({
    resource: 'things',
    path: '/api/v1/things?fieldSelector=x%3Dy',
    client: api,
    handler: {
      replace: (items) => {
        seen.replaced.push(items.map((i) => i.metadata!.name!));
        seen.replacedItems.push(items);
      },
      upsert: (o) => seen.upserts.push(o.metadata!.name!),
      remove: (o) => seen.removes.push(o.metadata!.name!),
      // What a streamed first state holds: a marked copy, so a test can tell it from the event's object.
      retain: (o) => ({ metadata: o.metadata, v: 1 }),
    },
    observer: {
      watchStarted: (r) => seen.starts.push(r), relisted: (r) => seen.relists.push(r), failed: (_e, ms) => seen.backoffs.push(ms),
      streamRefused: (e) => seen.refused.push(e.status), synced: (how) => seen.hows.push(how),
    },
    streamLists: opts.streamLists ?? false,
    random: () => 1,
    stallMs: opts.stallMs ?? 60_000,
    backoff: { initialMs: 10, maxMs: 80, resetAfterMs: opts.resetAfterMs ?? 60_000 },
    pacer: opts.pacer ?? new RecoveryPacer({ spacingMs: 0 }),
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.timeoutSeconds ? { timeoutSeconds: opts.timeoutSeconds } : {}),
  });
  const ac = new AbortController();
  const done = r.run(ac.signal);
  running.push(async () => {
    ac.abort();
    await done;
  });
  return { r, seen };
}
const running: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of running.splice(0)) await stop();
});
const list = (rv: string, ...names: string[]) => () => ({ items: names.map((n) => obj(n, rv)), metadata: { resourceVersion: rv } });
const param = (path: string, key: string) => new URLSearchParams(path.split('?')[1]).get(key);

describe('Reflector', () => {
  it('lists from the watch cache, then watches from that resourceVersion with bookmarks and a 5-10 min server timeout', async () => {
    const api = new FakeApi();
    api.lists.push(list('100', 'a', 'b'));
    const { r, seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    expect(param(api.listPaths[0]!, 'resourceVersion')).toBe('0');
    expect(param(api.listPaths[0]!, 'fieldSelector')).toBe('x=y');
    expect(seen.replaced).toEqual([['a', 'b']]);
    expect(r.synced).toBe(true);
    const w = api.watchPaths[0]!;
    expect(param(w, 'watch')).toBe('true');
    expect(param(w, 'allowWatchBookmarks')).toBe('true');
    expect(param(w, 'resourceVersion')).toBe('100');
    expect(Number(param(w, 'timeoutSeconds'))).toBeGreaterThanOrEqual(300);
    expect(Number(param(w, 'timeoutSeconds'))).toBeLessThanOrEqual(600);
  });

  it('delivers events in order and resumes from the last resourceVersion, bookmarks included', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    api.send('ADDED', obj('a', '101'));
    api.send('MODIFIED', obj('a', '102'));
    api.send('DELETED', obj('a', '103'));
    api.send('BOOKMARK', { metadata: { resourceVersion: '150' } });
    await waitFor(() => seen.removes.length === 1);
    expect(seen.upserts).toEqual(['a', 'a']);
    api.streams[0]!.end(); // server-side timeout: a normal end
    await waitFor(() => api.streams.length === 2);
    expect(param(api.watchPaths[1]!, 'resourceVersion')).toBe('150');
    expect(api.listPaths).toHaveLength(1); // no relist for a normal end
  });

  it.each([
    { how: 'an ERROR event with code 410', expire: (api: FakeApi) => api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' }) },
    { how: 'a 410 response to the watch', expire: (api: FakeApi) => { api.watchFailures.push(new ApiError(410, 'Gone', 'gone')); api.streams[0]!.end(); } },
  ])('relists with a consistent read after $how and replaces the state', async ({ expire }) => {
    const api = new FakeApi();
    api.lists.push(list('100', 'a'), list('900', 'b'));
    const { seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    expire(api);
    await waitFor(() => seen.replaced.length === 2);
    expect(seen.replaced[1]).toEqual(['b']);
    expect(param(api.listPaths[1]!, 'resourceVersion')).toBeNull();
    expect(seen.relists).toEqual(['expired']);
    await waitFor(() => api.streams.length >= 1 && api.watchPaths.some((p) => param(p, 'resourceVersion') === '900'));
  });

  it('backs off exponentially with jitter on errors and recovers', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    for (let i = 0; i < 5; i++) api.watchFailures.push(new Error('ECONNREFUSED'));
    const { r, seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    expect(seen.backoffs).toEqual([10, 20, 40, 80, 80]); // random()=1: the top of each jitter range, capped
    expect(r.downForMs()).toBe(0);
    expect(seen.starts.slice(-1)).toEqual(['error']);
  });

  it('waits at least the server\'s Retry-After (a 429 from priority and fairness), up to the backoff\'s cap', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    api.watchFailures.push(new ApiError(429, 'TooManyRequests', 'slow down', undefined, undefined, 50),
      new ApiError(429, 'TooManyRequests', 'slow down', undefined, undefined, 600_000), new Error('ECONNREFUSED'));
    const { seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    expect(seen.backoffs).toEqual([50, 80, 40]); // 50 over the 10 due; the cap over 10 minutes; then the backoff's own
  });

  it('reports how long the watch has been down', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    for (let i = 0; i < 1000; i++) api.watchFailures.push(new Error('ECONNREFUSED'));
    const { r } = start(api);
    await waitFor(() => r.downForMs() > 50);
  });

  it('replaces a watch that goes silent for longer than the stall bound', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { seen } = start(api, { stallMs: 100 });
    await waitFor(() => api.streams.length === 1);
    api.send('ADDED', obj('a', '101'));
    await waitFor(() => api.streams.length === 2);
    expect(api.streams[0]!.destroyed).toBe(true);
    expect(seen.starts).toContain('stall');
    expect(param(api.watchPaths[1]!, 'resourceVersion')).toBe('101');
  });

  it('keeps a watch that receives bookmarks within the stall bound', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    start(api, { stallMs: 2_000 });
    await waitFor(() => api.streams.length === 1);
    for (let i = 0; i < 8; i++) {
      api.send('BOOKMARK', { metadata: { resourceVersion: String(200 + i) } });
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(api.streams).toHaveLength(1);
  });

  it('starts the backoff over when a watch that had been connected for the reset period stalls', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    for (let i = 0; i < 4; i++) api.watchFailures.push(new Error('ECONNREFUSED'));
    const { seen } = start(api, { stallMs: 300, resetAfterMs: 200 });
    await waitFor(() => api.streams.length === 2); // the first watch connected, stayed silent, stalled
    // Escalated by the refusals, then back to the start: the stalled watch had been healthy for 300 ms >= 200.
    expect(seen.backoffs).toEqual([10, 20, 40, 80, 10]);
  });

  it('keeps escalating the backoff when watches stall before the reset period', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { seen } = start(api, { stallMs: 50, resetAfterMs: 60_000 });
    await waitFor(() => api.streams.length === 5);
    expect(seen.backoffs.slice(0, 4)).toEqual([10, 20, 40, 80]);
  });

  it('after 410 takes a pacer slot before the relist and another before the watch that follows it', async () => {
    const api = new FakeApi();
    api.lists.push(list('100', 'a'), list('900', 'b'));
    const { seen } = start(api, { pacer: new RecoveryPacer({ spacingMs: 300, random: () => 1 }) }); // idle: the whole first interval
    await waitFor(() => api.streams.length === 1);
    const t = Date.now();
    api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await waitFor(() => seen.replaced.length === 2);
    const relistedAfter = Date.now() - t;
    await waitFor(() => api.streams.length === 2);
    expect(relistedAfter).toBeGreaterThanOrEqual(250);
    expect(Date.now() - t).toBeGreaterThanOrEqual(550); // the watch one spacing after the relist
  });

  it('paces the retries of two reflectors that share a pacer: one request per spacing between them', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'), list('100'));
    const pacer = new RecoveryPacer({ spacingMs: 200, random: () => 0 });
    start(api, { pacer });
    start(api, { pacer });
    await waitFor(() => api.streams.length === 2);
    const watchesAt: number[] = [];
    const origStream = api.stream.bind(api);
    api.stream = (path, signal) => {
      watchesAt.push(Date.now());
      return origStream(path, signal);
    };
    for (let i = 0; i < 4; i++) api.watchFailures.push(new Error('ECONNREFUSED'));
    api.streams[0]!.destroy(new Error('ECONNRESET')); // the server went away: both watches break
    api.streams[1]!.destroy(new Error('ECONNRESET'));
    await waitFor(() => api.streams.length === 4, { timeoutMs: 20_000 });
    expect(watchesAt).toHaveLength(6); // 4 refused, then one watch each
    for (let i = 1; i < watchesAt.length; i++) expect(watchesAt[i]! - watchesAt[i - 1]!).toBeGreaterThanOrEqual(180);
  });

  it('does not pace the re-watch after a healthy watch ends at its server-side timeout', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { seen } = start(api, { pacer: new RecoveryPacer({ spacingMs: 3_600_000, random: () => 1 }), timeoutSeconds: [1, 1] }); // a paced request would wait an hour
    await waitFor(() => api.streams.length === 1);
    await new Promise((r) => setTimeout(r, 1_100)); // the 1 s timeout reached (and longer than an "ended immediately" watch)
    api.streams[0]!.end();
    await waitFor(() => api.streams.length === 2);
    expect(seen.starts).toEqual(['initial', 'timeout']);
  });

  it('paces the re-watch when the server ends a watch well before its timeout (an API server draining)', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { seen } = start(api, { pacer: new RecoveryPacer({ spacingMs: 300, random: () => 1 }), timeoutSeconds: [60, 60] });
    await waitFor(() => api.streams.length === 1);
    await new Promise((r) => setTimeout(r, 1_100)); // not an "ended immediately" watch: no backoff
    const t = Date.now();
    api.streams[0]!.end();
    await waitFor(() => api.streams.length === 2);
    expect(Date.now() - t).toBeGreaterThanOrEqual(250);
    expect(seen.starts).toEqual(['initial', 'closed']);
    expect(seen.backoffs).toEqual([]);
    expect(param(api.watchPaths[1]!, 'resourceVersion')).toBe('100');
  });
});

describe('Reflector against a misbehaving server', () => {
  it('backs off after a list without a resourceVersion, instead of listing again at once (there is nothing to watch from)', async () => {
    const api = new FakeApi();
    const noRv = () => ({ items: [], metadata: {} }) as never;
    api.lists.push(noRv, noRv, noRv, list('100', 'a'));
    const { seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    expect(seen.backoffs).toEqual([10, 20, 40]);
    expect(seen.replaced).toEqual([['a']]); // nothing replaced from the lists without one
    expect(param(api.watchPaths[0]!, 'resourceVersion')).toBe('100');
  });

  it('counts watches that are answered and closed at once as down (a proxy cutting streams), however long the pacer held each retry, until one delivers', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    // Each retry waits its pacer slot (over a second) before it connects: "at once" is from the connection.
    const { r } = start(api, { pacer: new RecoveryPacer({ spacingMs: 1_200, random: () => 1 }) });
    await waitFor(() => api.streams.length === 1);
    expect(r.downForMs()).toBe(0);
    for (let i = 1; i <= 3; i++) {
      api.streams.at(-1)!.end();
      await waitFor(() => api.streams.length === i + 1);
      expect(r.downForMs()).toBeGreaterThan(0);
    }
    api.send('BOOKMARK', { metadata: { resourceVersion: '150' } });
    await waitFor(() => r.downForMs() === 0);
  });

  it('counts a quiet watch after such a flap as up once it has stayed connected a second, with no event needed', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { r } = start(api);
    await waitFor(() => api.streams.length === 1);
    api.streams[0]!.end();
    await waitFor(() => api.streams.length === 2);
    expect(r.downForMs()).toBeGreaterThan(0);
    await waitFor(() => r.downForMs() === 0, { timeoutMs: 5_000 }); // connected, silent, lasting
    expect(api.streams).toHaveLength(2);
  });

  it('counts a watch that fails after a long healthy stretch as down from the failure, not from when it connected', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const clock = new FakeClock();
    const { r, seen } = start(api, { clock });
    await waitFor(() => api.streams.length === 1);
    clock.advance(30_000); // thirty healthy seconds, connected (the stall bound is 60 s)
    api.streams[0]!.destroy(new Error('ECONNRESET'));
    await waitFor(() => seen.backoffs.length === 1);
    expect(r.downForMs()).toBe(0); // down from the failure, this instant: not 30 s already
    clock.advance(5);
    expect(r.downForMs()).toBe(5);
  });

  it('counts the watch as down from a 410 until the relist answers (a relist that hangs is not healthy)', async () => {
    const api = new FakeApi();
    let answer: (() => void) | undefined;
    api.lists.push(list('100'), () => ({ items: [], metadata: { resourceVersion: '900' } }));
    const slow = api.json.bind(api);
    let calls = 0;
    api.json = async <T>(m: string, path: string): Promise<T> => {
      if (++calls === 2) await new Promise<void>((res) => { answer = res; });
      return slow<T>(m, path);
    };
    const { r } = start(api);
    await waitFor(() => api.streams.length === 1);
    api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await waitFor(() => answer !== undefined);
    await waitFor(() => r.downForMs() > 20);
    answer!();
    await waitFor(() => api.streams.length === 2);
    expect(r.downForMs()).toBe(0);
  });

  it('fails a watch whose event has no end within 16 Mi characters, rather than holding it', async () => {
    const api = new FakeApi();
    api.lists.push(list('100'));
    const { seen } = start(api);
    await waitFor(() => api.streams.length === 1);
    const mib = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < 17; i++) api.streams[0]!.write(mib);
    await waitFor(() => api.streams.length === 2);
    expect(api.streams[0]!.destroyed).toBe(true);
    expect(seen.starts.at(-1)).toBe('error');
  });
});

describe('Reflector, first state streamed (watch list)', () => {
  const END = { 'k8s.io/initial-events-end': 'true' };
  const stream = (opts: StartOptions = {}) => {
    const api = new FakeApi();
    return { api, ...start(api, { ...opts, streamLists: true }) };
  };

  it('asks the watch cache for the first state as events, holds only what retain keeps, replaces once at the closing bookmark and goes on watching', async () => {
    const { api, r, seen } = stream();
    await waitFor(() => api.streams.length === 1);
    const w = api.watchPaths[0]!;
    for (const [k, v] of [['watch', 'true'], ['sendInitialEvents', 'true'], ['resourceVersionMatch', 'NotOlderThan'], ['resourceVersion', '0'],
      ['allowWatchBookmarks', 'true'], ['fieldSelector', 'x=y']]) expect(param(w, k!), k).toBe(v);
    api.send('ADDED', obj('a', '90'));
    api.send('ADDED', obj('b', '95'));
    api.send('BOOKMARK', { metadata: { resourceVersion: '97' } }); // a plain bookmark: not the end
    await new Promise((res) => setTimeout(res, 50));
    expect(seen.replaced).toEqual([]);
    expect(seen.upserts).toEqual([]);
    expect(r.synced).toBe(false);
    api.send('BOOKMARK', { metadata: { resourceVersion: '100', annotations: END } });
    await waitFor(() => seen.replaced.length === 1);
    expect(seen.replaced).toEqual([['a', 'b']]);
    expect(seen.replacedItems[0]!.every((o) => o.v === 1)).toBe(true);
    expect(r.synced).toBe(true);
    expect(seen.relists).toEqual([]); // the first state is not a relist
    expect(seen.hows).toEqual(['stream']);
    api.send('MODIFIED', obj('a', '101'));
    await waitFor(() => seen.upserts.length === 1);
    api.streams[0]!.end(); // the server-side timeout
    await waitFor(() => api.streams.length === 2);
    expect(param(api.watchPaths[1]!, 'resourceVersion')).toBe('101');
    expect(param(api.watchPaths[1]!, 'sendInitialEvents')).toBeNull();
    expect(api.listPaths).toEqual([]); // one request did the list and the watch
  });

  it('after 410 streams the first state again from a consistent read, in one request, and counts a relist', async () => {
    const { api, seen } = stream();
    await waitFor(() => api.streams.length === 1);
    api.send('ADDED', obj('a', '90'));
    api.send('BOOKMARK', { metadata: { resourceVersion: '100', annotations: END } });
    await waitFor(() => seen.replaced.length === 1);
    api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await waitFor(() => api.streams.length === 2);
    const w = api.watchPaths[1]!;
    expect(param(w, 'sendInitialEvents')).toBe('true');
    expect(param(w, 'resourceVersion')).toBeNull(); // unset: a consistent read
    api.send('ADDED', obj('b', '900'));
    api.send('BOOKMARK', { metadata: { resourceVersion: '901', annotations: END } });
    await waitFor(() => seen.replaced.length === 2);
    expect(seen.replaced[1]).toEqual(['b']);
    expect(seen.relists).toEqual(['expired']);
    expect(seen.hows).toEqual(['stream', 'stream']);
    expect(api.listPaths).toEqual([]);
  });

  it.each([
    { how: 'the server ends the stream', cut: (s: PassThrough) => s.end() },
    { how: 'the connection breaks', cut: (s: PassThrough) => s.destroy(new Error('ECONNRESET')) },
  ])('when $how before the closing bookmark: replaces nothing, lists for the next attempt, streams again after that', async ({ cut }) => {
    const { api, r, seen } = stream();
    api.lists.push(list('500', 'b'));
    await waitFor(() => api.streams.length === 1);
    api.send('ADDED', obj('a', '90'));
    api.send('BOOKMARK', { metadata: { resourceVersion: '95' } });
    await new Promise((res) => setTimeout(res, 20));
    cut(api.streams[0]!);
    await waitFor(() => seen.replaced.length === 1);
    expect(seen.replaced).toEqual([['b']]); // the listed state, never the partial stream's 'a'
    expect(seen.hows).toEqual(['list']);
    expect(r.synced).toBe(true);
    expect(seen.backoffs).toHaveLength(1);
    await waitFor(() => api.streams.length === 2);
    expect(param(api.watchPaths[1]!, 'resourceVersion')).toBe('500'); // from the list, not the stream's bookmark
    api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await waitFor(() => api.streams.length === 3);
    expect(param(api.watchPaths[2]!, 'sendInitialEvents')).toBe('true');
    expect(api.listPaths).toHaveLength(1);
  });

  it('streams again after a failure before the server answered (a refused connection says nothing about streaming)', async () => {
    const api = new FakeApi();
    api.watchFailures.push(new Error('ECONNREFUSED'), new Error('ECONNREFUSED'));
    const { seen } = start(api, { streamLists: true });
    await waitFor(() => api.streams.length === 1);
    expect(api.listPaths).toEqual([]);
    expect(api.watchPaths.map((p) => param(p, 'sendInitialEvents'))).toEqual(['true', 'true', 'true']);
    expect(seen.backoffs).toHaveLength(2);
  });

  it('counts the watch as down until a streamed first state is complete, not from its response headers', async () => {
    const api = new FakeApi();
    for (let i = 0; i < 3; i++) api.watchFailures.push(new Error('ECONNREFUSED'));
    const { r, seen } = start(api, { streamLists: true });
    await waitFor(() => api.streams.length === 1); // connected, first state not complete
    const down = r.downForMs();
    expect(down).toBeGreaterThan(0);
    await new Promise((res) => setTimeout(res, 30));
    expect(r.downForMs()).toBeGreaterThan(down);
    api.send('BOOKMARK', { metadata: { resourceVersion: '100', annotations: END } });
    await waitFor(() => seen.replaced.length === 1);
    expect(r.downForMs()).toBe(0);
  });

  it.each([422, 400])('lists from then on, without a backoff, when the server refuses the stream with %i (a server without WatchList)', async (status) => {
    const api = new FakeApi();
    api.watchFailures.push(new ApiError(status, 'Invalid', 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden'));
    api.lists.push(list('100', 'a'), list('900', 'b'));
    const { seen } = start(api, { streamLists: true });
    await waitFor(() => seen.replaced.length === 1);
    expect(seen.refused).toEqual([status]);
    expect(seen.backoffs).toEqual([]);
    expect(param(api.listPaths[0]!, 'resourceVersion')).toBe('0'); // still the first list, from the watch cache
    await waitFor(() => api.streams.length === 1);
    api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await waitFor(() => seen.replaced.length === 2);
    expect(api.listPaths).toHaveLength(2);
    expect(api.watchPaths.filter((p) => param(p, 'sendInitialEvents') !== null)).toHaveLength(1); // only the refused one
    expect(seen.refused).toEqual([status]);
    expect(seen.hows).toEqual(['list', 'list']);
    // One start for the refused stream and the listed watch after it: it is one attempt at the first state.
    expect(seen.starts).toEqual(['initial', 'expired']);
  });

  it('keeps streaming after an ERROR event with code 422 inside an answered stream: only the HTTP status is a refusal', async () => {
    const { api, seen } = stream();
    api.lists.push(list('100'));
    await waitFor(() => api.streams.length === 1);
    api.send('ERROR', { kind: 'Status', code: 422, reason: 'Invalid', message: 'something in the stream' });
    await waitFor(() => api.streams.length === 2); // a partial first state: listed once (as client-go falls back)
    expect(seen.refused).toEqual([]);
    api.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await waitFor(() => api.streams.length === 3);
    expect(param(api.watchPaths.at(-1)!, 'sendInitialEvents')).toBe('true'); // streams again: not switched to lists for good
    expect(api.listPaths).toHaveLength(1);
  });

  it('holds the last of several events for one object in the first state, and drops one deleted before the closing bookmark', async () => {
    const { api, seen } = stream();
    await waitFor(() => api.streams.length === 1);
    api.send('ADDED', { metadata: { name: 'a', namespace: 'n1', uid: 'a1', resourceVersion: '1' } });
    api.send('ADDED', { metadata: { name: 'a', namespace: 'n2', uid: 'a2', resourceVersion: '2' } }); // same name, other namespace
    api.send('MODIFIED', { metadata: { name: 'a', namespace: 'n1', uid: 'a1', resourceVersion: '3' } });
    api.send('ADDED', obj('gone', '4'));
    api.send('DELETED', obj('gone', '5'));
    api.send('BOOKMARK', { metadata: { resourceVersion: '6', annotations: END } });
    await waitFor(() => seen.replaced.length === 1);
    expect(seen.replacedItems[0]!.map((o) => [o.metadata!.uid, o.metadata!.resourceVersion])).toEqual([['a1', '3'], ['a2', '2']]);
  });
});

describe('Backoff', () => {
  it('with full jitter (the watches) draws each delay from [0, step], doubling to the cap', () => {
    const draws = [0, 0.5, 1, 1, 1];
    const b = new Backoff({ initialMs: 100, maxMs: 400, random: () => draws.shift()!, fullJitter: true });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([0, 100, 400, 400, 400]);
  });

  it('by default (a pod\'s retries) draws from [step/2, step], so each delay grows', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 400, random: () => 0 });
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([50, 100, 200, 200]);
  });
});
