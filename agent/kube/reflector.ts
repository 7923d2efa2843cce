// Reflector: keeps a handler in step with one list+watch, the way client-go's
// reflector does, plus a stall watchdog on the raw stream (the JavaScript client's
// watches are known to go quiet forever without an error).
//
//   first state, streamed (KEP-3157's watch list, the API server's WatchList feature):
//     watch with sendInitialEvents=true, resourceVersionMatch=NotOlderThan,
//     resourceVersion=0 (the watch cache; unset after 410: a consistent read)
//     -> each object arrives as its own event and only `retain(obj)` is held;
//        the bookmark annotated k8s.io/initial-events-end -> replace(held);
//        the same request then goes on as the watch below
//     refused as invalid (422/400: a server without the feature, as 1.33 by default)
//       -> list as below, from then on
//     any other end before that bookmark -> nothing replaced, the held objects dropped;
//       the next attempt lists (as client-go falls back), the one after streams again
//   first state, listed: list (resourceVersion=0, from the watch cache) -> replace(items);
//     a list without a resourceVersion is a failure (nothing to watch from)
//   loop: watch from the last resourceVersion seen (bookmarks included),
//         allowWatchBookmarks, server-side timeoutSeconds randomised in 5-10 min
//     end at its timeout    -> watch again at once from the same resourceVersion
//     end before it         -> the server is draining or restarting ('closed'): watch
//                              again from the same resourceVersion, paced (below)
//     410 Gone / Expired    -> the first state again, from a consistent read
//     error / refused / stall -> exponential backoff with jitter (at least the server's
//                              Retry-After, up to the cap), then watch again
//     an event line past 16 Mi characters -> a failure (never held whole)
//   down (downForMs, /readyz) from a failure, a 410 or a watch that ended at once, until a
//   watch is connected again (after watches ended at once: one that delivers or lasts;
//   watchhealth.ts)
//   every request that follows a failure or an early end (the retried watch, the relist
//   after 410 and the watch after it) first takes a slot from the agent's RecoveryPacer, which the
//   agent's reflectors share: a fleet's reconnect after an API server restart spreads
//   out instead of arriving in the same second (pacer.ts)
//   a watch that stayed connected for backoff.resetAfterMs was healthy, however it
//   ended: the backoff starts over, so one stall after a long healthy watch costs
//   one short pause, not the delay that earlier failures had built up

import { Backoff, realClock, sleep, type Clock } from '../common/clock.ts';
import { RECOVERY_SPACING_MS, STALL_MS, WATCH_BACKOFF, WATCH_TIMEOUT_SECONDS } from '../common/defaults.ts';
import { ApiError, type ApiClient } from './client.ts';
import { RecoveryPacer } from './pacer.ts';
import type { KubeObject, ReflectorHandler, ReflectorObserver, RestartReason } from './reflectorcontract.ts';
import { LASTED_MS, WatchHealth } from './watchhealth.ts';
import { readLines } from './watchlines.ts';

export interface ReflectorOptions<T extends KubeObject> {
  /** Label for logs and metrics, e.g. "pods". */
  resource: string;
  /** Collection path with its selectors, e.g. /api/v1/pods?fieldSelector=spec.nodeName%3Dn1 */
  path: string;
  client: ApiClient;
  handler: ReflectorHandler<T>;
  observer?: ReflectorObserver;
  clock?: Clock;
  random?: () => number;
  /** No byte (event or bookmark) for this long means the connection is dead. */
  stallMs?: number;
  /** Server-side watch timeout range in seconds. */
  timeoutSeconds?: readonly [number, number];
  backoff?: { initialMs: number; maxMs: number; resetAfterMs: number };
  /**
   * Paces the requests that follow a failure. Share one between an agent's reflectors: the
   * bound is per agent. Default: a pacer of this reflector's own, RECOVERY_SPACING_MS apart.
   */
  pacer?: RecoveryPacer;
  /** Ask for the first state as a stream of events (default); false: always list. */
  streamLists?: boolean;
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: KubeObject & { code?: number; reason?: string; message?: string; metadata?: { annotations?: Record<string, string> } };
}

/** The annotation on the bookmark that ends a streamed first state (metav1.InitialEventsAnnotationKey). */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/**
 * One watch event, at most (characters of its JSON line). An object is at most etcd's
 * 1.5 MiB request limit, so this is far above any real event; past it the watch fails.
 */
export const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/** A watch that ends before this share of its timeout was ended by the server, not timed out. */
const EARLY_END = 0.9;

class Gone extends Error {}
class Stalled extends Error {}
/** A streamed first state ended before its closing bookmark. */
class Unfinished extends Error {}

/** How the next first state is read. */
type FirstState = 'stream' | 'list-once' | 'list';

/** The objects of a streamed first state, held until its closing bookmark. */
interface Arriving<T> {
  readonly reason: RestartReason;
  readonly held: Map<string, T>;
  /** The server answered the request (a failure before that says nothing about streaming). */
  answered: boolean;
}

export class Reflector<T extends KubeObject> {
  readonly #o: Required<Omit<ReflectorOptions<T>, 'observer' | 'streamLists'>> & { observer: ReflectorObserver };
  readonly #backoff: Backoff;
  #rv: string | undefined;
  #synced = false;
  readonly #health: WatchHealth;
  /** When the current watch's response arrived; undefined while not connected. */
  #connectedAt: number | undefined;
  /** The current watch's server-side timeout, in ms. */
  #timeoutMs = 0;
  #first: FirstState;
  /** Set while the current watch streams the first state; undefined once it is replaced. */
  #arriving: Arriving<T> | undefined;

  constructor(opts: ReflectorOptions<T>) {
    this.#o = {
      clock: realClock,
      random: Math.random,
      stallMs: STALL_MS,
      timeoutSeconds: WATCH_TIMEOUT_SECONDS,
      backoff: WATCH_BACKOFF,
      observer: {},
      ...opts,
      pacer: opts.pacer ?? new RecoveryPacer({ spacingMs: RECOVERY_SPACING_MS, clock: opts.clock ?? realClock, random: opts.random ?? Math.random }),
    };
    this.#first = opts.streamLists === false ? 'list' : 'stream';
    this.#health = new WatchHealth(this.#o.clock);
    // Full jitter: every agent's watch breaks at the same instant when the API server restarts.
    this.#backoff = new Backoff({ ...this.#o.backoff, random: this.#o.random, fullJitter: true });
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** Milliseconds the watch has been down, 0 when healthy. */
  downForMs(): number {
    return this.#health.downForMs();
  }

  /** Runs until the signal aborts. Never throws: failures are retried with backoff. */
  async run(signal: AbortSignal): Promise<void> {
    let reason: RestartReason = 'initial';
    /** The next requests follow a failure: each takes a pacer slot first. */
    let recovering = false;
    /** The watch after a refused stream continues that attempt: it is not another start. */
    let counted = false;
    while (!signal.aborted) {
      const started = this.#o.clock.now();
      try {
        if (this.#rv === undefined && this.#first !== 'stream') {
          if (recovering) await this.#o.pacer.slot(signal);
          if (signal.aborted) break;
          await this.#list(reason, signal);
        }
        if (recovering) await this.#o.pacer.slot(signal);
        if (signal.aborted) break;
        if (!counted) this.#o.observer.watchStarted?.(reason);
        counted = false;
        await this.#watch(signal, reason);
        // A server that ends a watch well before its timeout is going away (a graceful
        // shutdown closes every watch at once): the next watch is paced like a retry.
        const lasted = this.#connectedAt === undefined ? 0 : this.#o.clock.now() - this.#connectedAt;
        const early = this.#connectedAt !== undefined && lasted < EARLY_END * this.#timeoutMs;
        this.#ended();
        reason = early ? 'closed' : 'timeout';
        recovering = early;
        // A watch that ends within LASTED_MS of connecting, repeatedly, must not become a
        // request storm, and is down (measured from the connection: the pacer's wait before
        // it says nothing about the watch).
        if (lasted < LASTED_MS) {
          recovering = true;
          this.#health.endedAtOnce(this.#o.clock.now() - lasted);
          await this.#pause(new Error('watch ended immediately'), signal);
        } else {
          this.#health.up();
        }
      } catch (err) {
        // Down from now if the watch was connected (it worked until now), else from this
        // attempt's start. Not from `started` after a long healthy watch: that would count
        // its healthy minutes as down, and fail /readyz at once.
        const downFrom = this.#connectedAt !== undefined ? this.#o.clock.now() : started;
        this.#ended();
        counted = false;
        if (signal.aborted) break;
        if (this.#arriving) {
          const answered = this.#arriving.answered;
          this.#arriving = undefined; // a partial first state is never replaced
          // Refused by its HTTP status only: an ERROR event in an answered stream is not a refusal.
          if (!answered && err instanceof ApiError && (err.status === 422 || err.status === 400)) {
            this.#first = 'list';
            this.#o.observer.streamRefused?.(err);
            counted = true;
            continue; // a server without the feature, not a failing one: list now, no backoff
          }
          // Only a stream the server began and did not finish: a refused connection or a
          // server still starting says nothing about streaming, and the retry streams again.
          if (answered && this.#first === 'stream') this.#first = 'list-once';
        }
        recovering = true;
        if (err instanceof Gone) {
          this.#rv = undefined; // relist from a consistent read, then resume
          reason = 'expired';
          this.#health.down(downFrom); // down until the first state is read again
          continue;
        }
        reason = err instanceof Stalled ? 'stall' : 'error';
        this.#health.down(downFrom);
        await this.#pause(err, signal);
      }
    }
  }

  /** A watch ended: if it had been connected for resetAfterMs it was healthy, so the backoff starts over. */
  #ended(): void {
    if (this.#connectedAt !== undefined && this.#o.clock.now() - this.#connectedAt >= this.#o.backoff.resetAfterMs) this.#backoff.reset();
    this.#connectedAt = undefined;
  }

  async #pause(err: unknown, signal: AbortSignal): Promise<void> {
    // The server's Retry-After (a 429 from priority and fairness) is a floor, up to the backoff's cap.
    const asked = err instanceof ApiError ? Math.min(err.retryAfterMs ?? 0, this.#o.backoff.maxMs) : 0;
    const ms = Math.max(this.#backoff.next(), asked);
    this.#o.observer.failed?.(err, ms);
    await sleep(this.#o.clock, ms, signal);
  }

  async #list(reason: RestartReason, signal: AbortSignal): Promise<void> {
    // First list from the watch cache (cheap for the API server); after 410 a consistent read.
    const path = reason === 'initial' ? `${this.#o.path}${sep(this.#o.path)}resourceVersion=0` : this.#o.path;
    const list = await this.#o.client.json<{ items?: T[]; metadata?: { resourceVersion?: string } } | null>('GET', path);
    if (signal.aborted) return;
    const rv = list?.metadata?.resourceVersion;
    // Without one there is nothing to watch from, and a watch without one would ask for the
    // first state again: a failure, backed off like any other.
    if (typeof rv !== 'string' || rv === '') throw new Error(`the ${this.#o.resource} list has no metadata.resourceVersion`);
    this.#replaced(list!.items ?? [], rv, reason, 'list');
    if (this.#first === 'list-once') this.#first = 'stream';
  }

  #replaced(items: T[], rv: string, reason: RestartReason, how: 'stream' | 'list'): void {
    this.#o.handler.replace(items);
    this.#rv = rv;
    this.#synced = true;
    this.#o.observer.synced?.(how, reason);
    if (reason !== 'initial') this.#o.observer.relisted?.(reason);
  }

  /** Watches from #rv; without one, streams the first state (see the header) and goes on watching. */
  async #watch(signal: AbortSignal, reason: RestartReason): Promise<void> {
    const [lo, hi] = this.#o.timeoutSeconds;
    const timeout = Math.floor(lo + this.#o.random() * (hi - lo));
    this.#timeoutMs = timeout * 1000;
    let from = `resourceVersion=${encodeURIComponent(this.#rv ?? '')}`;
    this.#arriving = undefined;
    if (this.#rv === undefined) {
      this.#arriving = { reason, held: new Map(), answered: false };
      // From the watch cache at first, as the list would be; after a failure, a consistent read.
      from = `sendInitialEvents=true&resourceVersionMatch=NotOlderThan${reason === 'initial' ? '&resourceVersion=0' : ''}`;
    }
    const path = `${this.#o.path}${sep(this.#o.path)}watch=true&allowWatchBookmarks=true&${from}&timeoutSeconds=${timeout}`;
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let stalled = false;
    let cancelStall = () => {};
    let cancelLasted = () => {};
    const armStall = () => {
      cancelStall();
      cancelStall = this.#o.clock.setTimer(() => {
        stalled = true;
        ac.abort();
      }, this.#o.stallMs);
    };
    armStall(); // also bounds the wait for response headers
    try {
      const res = await this.#o.client.stream(path, ac.signal);
      this.#connectedAt = this.#o.clock.now();
      // Up again once it watches: for a streamed first state, at its closing bookmark; after
      // watches that ended at once, at its first event or once it has lasted LASTED_MS.
      if (this.#arriving) this.#arriving.answered = true;
      else cancelLasted = this.#health.connected();
      await readLines(res, MAX_EVENT_CHARS, armStall, (line) => this.#dispatch(JSON.parse(line) as WatchEvent), this.#o.resource);
      if (this.#arriving) throw new Unfinished(`the ${this.#o.resource} watch ended before its first state was complete`);
    } catch (err) {
      if (stalled) throw new Stalled(`no data on the ${this.#o.resource} watch for ${this.#o.stallMs} ms`);
      if (err instanceof ApiError && (err.status === 410 || err.reason === 'Expired' || err.reason === 'Gone')) throw new Gone();
      throw err;
    } finally {
      cancelStall();
      cancelLasted();
      signal.removeEventListener('abort', onAbort);
      ac.abort();
    }
  }

  #dispatch(ev: WatchEvent): void {
    if (ev.type === 'ERROR') {
      const code = ev.object.code;
      if (code === 410 || ev.object.reason === 'Expired' || ev.object.reason === 'Gone') throw new Gone();
      throw new ApiError(code ?? 0, ev.object.reason ?? '', `watch error: ${ev.object.message ?? 'unknown'}`);
    }
    if (this.#arriving) return this.#arrive(this.#arriving, ev);
    this.#health.delivered();
    const rv = ev.object.metadata?.resourceVersion;
    if (ev.type === 'ADDED' || ev.type === 'MODIFIED') this.#o.handler.upsert(ev.object as T);
    else if (ev.type === 'DELETED') this.#o.handler.remove?.(ev.object as T);
    if (rv) this.#rv = rv;
  }

  /** An event of a streamed first state: held (or dropped) until the closing bookmark replaces them all. */
  #arrive(a: Arriving<T>, ev: WatchEvent): void {
    const m = ev.object.metadata;
    if (ev.type === 'BOOKMARK') {
      // Only the closing bookmark moves the resume point: resuming before it would skip the replace.
      if (m?.annotations?.[INITIAL_EVENTS_END] !== 'true' || !m.resourceVersion) return;
      this.#arriving = undefined;
      this.#health.up();
      this.#replaced([...a.held.values()], m.resourceVersion, a.reason, 'stream');
      return;
    }
    const key = `${m?.namespace ?? ''}/${m?.name ?? ''}`;
    if (ev.type === 'DELETED') a.held.delete(key);
    else a.held.set(key, this.#o.handler.retain ? this.#o.handler.retain(ev.object as T) : ev.object as T);
  }
}

function sep(path: string): string {
  return path.includes('?') ? '&' : '?';
}
