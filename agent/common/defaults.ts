// Every default value of the agent, in one place: the defaults of `run`'s flags (the
// README's flag table) and the built-in bounds of the parts those flags tune. Modules
// take these as option defaults; none keeps a number of its own.

/** --kubelet-root: where the kubelet keeps pods/<uid>/volumes. */
export const KUBELET_ROOT = '/var/lib/kubelet';
/** --registration-dir: the kubelet's plugin watcher directory under the default root. */
export const REGISTRATION_DIR = '/var/lib/kubelet/plugins_registry';
/** --health-addr. */
export const HEALTH_ADDR = ':8080';
/** --log-level. */
export const LOG_LEVEL = 'info';

/** --resync-seconds: every volume is verified on disk this often (backstop for missed inotify events). */
export const RESYNC_MS = 60_000;
/** --max-bytes: a pod whose files add up to more is refused (TooLarge). */
export const MAX_BYTES = 256 * 1024;
/** --concurrency: volumes written in parallel. */
export const CONCURRENCY = 4;
/**
 * Pods of a first state (or relist) rendered before the event loop gets a turn. Rendering
 * 1,000 pods in one go with every feature on let V8's young generation grow to 14 MiB while
 * a major GC could not finish (docs/contributing/benchmarks.md); slices keep it at its 2 MiB bound.
 */
export const FIRST_STATE_SLICE = 100;
/** --ready-down-seconds: /readyz fails once the pod watch has been down this long. */
export const READY_DOWN_MS = 60_000;

/**
 * --stall-seconds: a watch that delivered no byte for this long is replaced. The API
 * server sends a bookmark about once a minute on an idle watch, so 90 s is one missed
 * bookmark plus margin, not idleness.
 */
export const STALL_MS = 90_000;
/** Server-side watch timeout, drawn per watch from this range so a fleet does not reconnect in step. */
export const WATCH_TIMEOUT_SECONDS: readonly [number, number] = [300, 600];
/** Watch retries: client-go's reflector numbers (0.8 s doubling to 30 s), reset after 60 s connected. */
export const WATCH_BACKOFF = { initialMs: 800, maxMs: 30_000, resetAfterMs: 60_000 } as const;
/**
 * An agent's requests that follow a failure (retried watches, relists after 410) go out at
 * least this far apart, the first at a random point of the first interval (kube/pacer.ts).
 * A restarted API server then sees about 1 / 4 s = 0.25 requests per agent per second from
 * a fleet that reconnects at once, instead of all of them in the same second
 * (bench:fleet, docs/PERFORMANCE.md). An agent's six requests after a restart (a watch
 * answered 410, a relist and a new watch, for pods and for its Node) take about 24 s.
 * At 3 s the sustained rate was 0.33 and the peak second 0.48-0.65 per agent: requests
 * held by a server still starting are answered together.
 */
export const RECOVERY_SPACING_MS = 4_000;

/**
 * A new connection to the API server must finish its TLS handshake within `initialMs` of its
 * TCP connect; after one that did not, the next gets twice as long, up to `maxMs`
 * (client-go's TLS handshake timeout), and one that finishes sets the deadline to twice the
 * time it took, within those bounds: a server that handshakes slowly stays reachable, one
 * that handshakes at once gets the short deadline back.
 *
 * Why so short at first: a restarting kube-apiserver binds its port seconds before it
 * serves it, and the kernel accepts connections for it meanwhile. Without this bound a
 * watch sent to it waited for the stall watchdog (90 s) or for the server; behind a load
 * balancer that had sent it to a server still starting, the node's files stayed stale
 * that long while other servers served. Given up, the request goes again at the agent's
 * next paced slot, perhaps to a server that serves.
 *
 * What it does not do: lighten a restarted server's first second. The connections given
 * up stay in its accept queue and each costs it a failed handshake when it starts serving
 * (bench:fleet counts them: docs/PERFORMANCE.md, "Reconnect storm").
 */
export const HANDSHAKE_DEADLINE = { initialMs: 1_000, maxMs: 10_000 } as const;

/** Per-pod retry of a failed sync (a full or read-only volume, say). */
export const SYNC_RETRY = { initialMs: 500, maxMs: 60_000 } as const;
/** Warning Events per object and reason: a burst, then one per refill period. */
export const EVENT_LIMIT = { burst: 3, refillMs: 120_000 } as const;
/** Events posted to the API server at once; the others wait their turn. */
export const EVENT_IN_FLIGHT = 16;
/** Events waiting at most: past this (a flood no per-object limit stopped) one is dropped and counted. */
export const EVENT_QUEUE = 1_000;
/** Tries per Event, the first included, when the server refuses for a moment (429, 5xx, no answer). */
export const EVENT_TRIES = 3;
/** The first Event retry's delay (then doubled, jittered), unless the server's Retry-After asks for longer. */
export const EVENT_RETRY_MS = 2_000;
/**
 * Repairs of one pod's volumes after its own changes to the agent's files (self-heal): a
 * burst, then one per refill period. A pod that rewrites them in a loop gets its files back
 * once a second, not once per inotify event.
 */
export const HEAL_LIMIT = { burst: 5, refillMs: 1_000 } as const;
/** Log lines about one pod's failures: a burst, then one per refill period. */
export const FAILURE_LOG_LIMIT = { burst: 3, refillMs: 60_000 } as const;

/** CSI publish: how long to wait for the pod on the watch before one GET of it. */
export const CSI_POD_WAIT_MS = 5_000;

/**
 * --owner-refresh-seconds: an owner's metadata is read again this long after its last read
 * while pods still use it, so a ReplicaSet moving to another Deployment reaches the files
 * within 1.25x this. At 5,000 nodes with 80 owners each: 670 reads/s cluster-wide, all from
 * the API servers' watch caches (docs/PERFORMANCE.md, "Following owners").
 */
export const OWNER_REFRESH_MS = 600_000;
/**
 * Owners one agent holds at most. A node's pods name a few hundred at most (110 pods, chains of
 * a few owners); the bound is for pod authors who rewrite their pods' ownerReferences with
 * fresh UIDs: past it the owners looked up least lately go, and are read again if needed.
 */
export const AGENT_MAX_OWNERS = 4_096;


/**
 * --annotation-qps, and its burst as a multiple of it: the agent's PATCHes of pod annotations
 * on one node. One ownership change costs one PATCH per affected pod: a ReplicaSet's 110 pods
 * on one node adopted by a new Deployment (nodes that follow owners) are written within
 * (110 - 100) / 20 = 0.5 s of the burst. The kubelet's own default is 50 QPS (burst 100)
 * for all of its requests.
 */
export const ANNOTATION_QPS = 20;
export const ANNOTATION_BURST_FACTOR = 5;
/** PATCHes of pod annotations in flight at once (each takes one of the client's plain sockets). */
export const ANNOTATION_CONCURRENCY = 4;
/** How long a node's annotation writes wait after a 429, at least (more if its Retry-After says so). */
export const THROTTLED_RETRY_MS = 1_000;
/** Each 429 in a row on a node doubles that, this many times at most (1 s to 32 s). */
export const THROTTLED_DOUBLINGS = 5;

/**
 * The API server's timeout for one call of the webhook (its configuration's timeoutSeconds);
 * --owner-budget-ms stays under it.
 */
export const WEBHOOK_TIMEOUT_SECONDS = 5;
