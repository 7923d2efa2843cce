import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { Backoff } from '../../../agent/common/clock.ts';
import { ApiError, type ApiClient } from '../../../agent/kube/client.ts';
import { RecoveryPacer } from '../../../agent/kube/pacer.ts';
import { Reflector, type KubeObject, type RestartReason } from '../../../agent/kube/reflector.ts';
import { waitFor } from '../../../localcluster/wait.ts';

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

function start(api: FakeApi, opts: { stallMs?: number; resetAfterMs?: number; pacer?: RecoveryPacer; timeoutSeconds?: [number, number] } = {}) {
  const seen = { replaced: [] as string[][], upserts: [] as string[], removes: [] as string[], starts: [] as RestartReason[], relists: [] as RestartReason[], backoffs: [] as number[] };
  const r = new Reflector<Obj>({
    resource: 'things',
    path: '/api/v1/things?fieldSelector=x%3Dy',
    client: api,
    handler: {
      replace: (items) => seen.replaced.push(items.map((i) => i.metadata!.name!)),
      upsert: (o) => seen.upserts.push(o.metadata!.name!),
      remove: (o) => seen.removes.push(o.metadata!.name!),
    },
    observer: { watchStarted: (r) => seen.starts.push(r), relisted: (r) => seen.relists.push(r), failed: (_e, ms) => seen.backoffs.push(ms) },
    random: () => 1,
    stallMs: opts.stallMs ?? 60_000,
    backoff: { initialMs: 10, maxMs: 80, resetAfterMs: opts.resetAfterMs ?? 60_000 },
    pacer: opts.pacer ?? new RecoveryPacer({ spacingMs: 0 }),
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
