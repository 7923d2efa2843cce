// Command-line and environment configuration for `ownerrefs-agent run`.
// Flags win over environment variables, which win over defaults.

import path from 'node:path';
import * as D from './common/defaults.ts';
import { ConfigError } from './common/errors.ts';
import { flagHelp, hostPort, logLevel, parseFlags } from './common/flags.ts';
import { BUILTIN_KINDS, parseFollowKinds, type FollowedKind } from './owners/ownermeta.ts';

export interface AgentConfig {
  nodeName: string;
  /** Path to a kubeconfig; undefined means in-cluster service account. */
  kubeconfig: string | undefined;
  /** Absolute and normalised, once, here: every module builds and compares paths below it. */
  kubeletRoot: string;
  healthHost: string;
  healthPort: number;
  logLevel: string;
  resyncMs: number;
  maxBytes: number;
  stallMs: number;
  /** /readyz fails once the pod watch has been down this long. */
  readyDownMs: number;
  concurrency: number;
  /** CSI mode: serve the ownerrefs.dev driver on this unix socket; undefined: off. */
  csiSocket?: string | undefined;
  /** Register the CSI driver with the kubelet here; undefined: do not (a registrar sidecar does). */
  registrationDir?: string | undefined;
  /** Kinds followed beyond the built-in workloads (the files of nodes that follow owners; the workload annotations on every node). */
  followKinds: FollowedKind[];
  ownerRefreshMs: number;
  /** PATCHes of pod annotations per second on this node (the burst is five times this). */
  annotationQps: number;
}

/** The commands, with what each does: the top-level --help and docs/reference list them. */
export const COMMANDS = {
  run: 'keep the ownerReferences this node\'s pods read current: their annotations, and opted-in volumes\' files',
  render: 'print (or write) the files the agent would write for one Pod manifest',
  webhook: 'serve the admission webhook that makes KEP-4753\'s fieldRef metadata.ownerReferences valid',
  gate: 'admission.mode=policy: write the workload values of the pods it gated, and lift their scheduling gate',
  inject: 'print what the webhook would make of a manifest (offline)',
  doctor: 'check what the agent depends on, and say how to fix what is wrong',
} as const;

/** Every command's exit codes (main.ts, render's and inject's refusals), with what each means. */
export const EXIT = {
  ok: { code: 0, meaning: 'done' },
  failure: { code: 1, meaning: 'bad input or a failure (doctor: a check failed)' },
  usage: { code: 2, meaning: 'bad usage: no command, an unknown command or flag, a bad flag value' },
  refused: { code: 3, meaning: '(render) the agent would post a Warning Event for the pod, (inject) the webhook would deny an object' },
  sigpipe: { code: 141, meaning: 'the reader of standard output went away (as for a program killed by SIGPIPE)' },
} as const;

export function mainHelp(): string {
  const commands = Object.entries(COMMANDS).map(([name, what]) => `  ${name.padEnd(8)} ${what}`);
  const codes = Object.values(EXIT).map((e) => `  ${String(e.code).padEnd(8)} ${e.meaning}`);
  return `Usage: ownerrefs-agent <command> [flags]

Commands:
${commands.join('\n')}

Run "ownerrefs-agent <command> --help" for a command's flags. --debug adds the stack
trace to an error message. --version prints the version.

Exit codes:
${codes.join('\n')}
`;
}

/**
 * Flag name, env var, default, help (one line: --help prints it), and `doc` where the
 * reference needs more than a line. docs/reference/command-line.md is generated from these.
 */
export const RUN_FLAGS = {
  'node-name': { env: 'NODE_NAME', def: '', help: 'this node\'s name (required; the DaemonSet sets it from spec.nodeName through the downward API)' },
  kubeconfig: { env: 'KUBECONFIG', def: '', help: 'kubeconfig file; empty means the pod\'s service account (in-cluster)' },
  'kubelet-root': { env: 'OWNERREFS_KUBELET_ROOT', def: D.KUBELET_ROOT, help: 'kubelet root directory, with volumes at pods/<uid>/volumes/kubernetes.io~empty-dir/<name> (a relative path is resolved against the working directory)' },
  'health-addr': { env: 'OWNERREFS_HEALTH_ADDR', def: D.HEALTH_ADDR, help: 'host:port for /healthz, /readyz and /metrics (plain HTTP)' },
  'log-level': {
    env: 'LOG_LEVEL', def: D.LOG_LEVEL, help: 'trace, debug, info, warn, error or fatal',
    doc: 'pino level: trace, debug, info, warn, error or fatal. Logs are JSON, one line per event, with pod, volume and reason fields; err is the type, message and errno or HTTP status for network and API failures (no stack on every retry), with the stack for anything else.',
  },
  'resync-seconds': { env: 'OWNERREFS_RESYNC_SECONDS', def: String(D.RESYNC_MS / 1000), help: 'verify every volume on disk this often (backstop for missed inotify events)' },
  'max-bytes': { env: 'OWNERREFS_MAX_BYTES', def: String(D.MAX_BYTES), help: 'refuse pods whose files add up to more than this many bytes (Event reason TooLarge)' },
  'stall-seconds': { env: 'OWNERREFS_STALL_SECONDS', def: String(D.STALL_MS / 1000), help: 'replace a watch that sent nothing (not even a bookmark) for this long' },
  'ready-down-seconds': { env: 'OWNERREFS_READY_DOWN_SECONDS', def: String(D.READY_DOWN_MS / 1000), help: '/readyz fails after the pod watch has been down this long' },
  concurrency: { env: 'OWNERREFS_CONCURRENCY', def: String(D.CONCURRENCY), help: 'volumes written in parallel' },
  'csi-socket': {
    env: 'OWNERREFS_CSI_SOCKET', def: '', help: 'serve the CSI driver ownerrefs.dev on this unix socket, the same path on the host (empty: CSI mode off)',
    doc: 'Serve the CSI driver ownerrefs.dev on this unix socket (empty: CSI mode off). It is what the agent registers with the kubelet, which dials it: the path must be the same on the host. The chart uses <kubelet root>/plugins/ownerrefs.dev/csi.sock.',
  },
  'registration-dir': { env: 'OWNERREFS_REGISTRATION_DIR', def: D.REGISTRATION_DIR, help: 'with --csi-socket: register the driver with the kubelet by serving ownerrefs.dev-reg.sock in this directory (empty: do not register; node-driver-registrar does)' },
  'follow-kinds': {
    env: 'OWNERREFS_FOLLOW_KINDS', def: '', help: 'owner kinds to follow beyond the built-in workloads, group/version/Kind=resource,... (each needs get in rbac-follow-owners.yaml)',
    doc: `Kinds to follow (for the workload annotations on every node, and the files of nodes labelled ownerrefs.dev/follow-owners=true) beyond ${BUILTIN_KINDS.map((k) => k.kind).join(', ')}, as group/version/Kind=resource,... (e.g. argoproj.io/v1alpha1/Rollout=rollouts); each needs get added to rbac-follow-owners.yaml.`,
  },
  'owner-refresh-seconds': { env: 'OWNERREFS_OWNER_REFRESH_SECONDS', def: String(D.OWNER_REFRESH_MS / 1000), help: 'read an owner that pods still use again after this long (bounds how late a change of its own owner shows)' },
  'annotation-qps': { env: 'OWNERREFS_ANNOTATION_QPS', def: String(D.ANNOTATION_QPS), help: `PATCHes of pod annotations (the KEP's syntax) per second on this node, after a burst of ${D.ANNOTATION_BURST_FACTOR} times this` },
} as const;


/**
 * V8 flags the agent runs with (Dockerfile ENTRYPOINT; tests, demo and bench spawn it the
 * same way). A 1 MiB semi-space keeps the young generation small: the agent's garbage is
 * short-lived and tiny, and the default (16 MiB semi-spaces) costs tens of MiB of RSS
 * per node for nothing. --no-opt --no-maglev keep V8's interpreter and baseline compiler
 * and drop its optimising compilers: their code pages and working memory cost 7-20 MiB
 * per agent once a scrape or a burst wakes them. The price is CPU: about 12 % more per owner
 * change, and a propagation tail that more often exceeds 1.5x the bare watch under a burst
 * (NODE_FLAGS_OPTIMIZING). --memory-saver-mode makes V8 collect before
 * growing the heap and give freed pages back: under steady churn it otherwise lets the
 * old generation grow to several times the live heap and keeps the pages (the soak:
 * 112 MiB after 30 min and 128 after 60, against 68-78 MiB flat). docs/PERFORMANCE.md and
 * npm run soak measures all three.
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1', '--no-opt', '--no-maglev', '--memory-saver-mode'];

/**
 * NODE_FLAGS with V8's optimising compilers on: the chart's `v8.optimizingCompilers` (its
 * `command` then replaces the image's ENTRYPOINT). For nodes where bursts of pod changes
 * matter more than 8 to 18 MiB of RSS per agent (docs/PERFORMANCE.md measures both).
 */
export const NODE_FLAGS_OPTIMIZING: readonly string[] = NODE_FLAGS.filter((f) => f !== '--no-opt' && f !== '--no-maglev');

/**
 * Environment the agent runs with (Dockerfile ENV; tests, demo and bench likewise).
 * glibc gives each libuv pool thread its own malloc arena; with two arenas the soak's
 * RSS stays flat instead of stepping up by tens of MB as arenas fragment (npm run soak).
 */
export const AGENT_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };

export function parseRunConfig(argv: string[], env: NodeJS.ProcessEnv): AgentConfig {
  const { get, num } = parseFlags(RUN_FLAGS, argv, env);
  const nodeName = get('node-name');
  if (!nodeName) throw new ConfigError('--node-name (or NODE_NAME) is required');
  const [healthHost, healthPort] = hostPort('health-addr', get('health-addr'));
  const csiSocket = get('csi-socket');
  if (csiSocket && !csiSocket.startsWith('/')) throw new ConfigError(`--csi-socket must be an absolute path, got ${JSON.stringify(csiSocket)}`);
  return {
    nodeName,
    kubeconfig: get('kubeconfig') || undefined,
    kubeletRoot: path.resolve(get('kubelet-root')),
    healthHost,
    healthPort,
    logLevel: logLevel(get('log-level')),
    resyncMs: num('resync-seconds', 1) * 1000,
    maxBytes: num('max-bytes', 1024),
    stallMs: num('stall-seconds', 1) * 1000,
    readyDownMs: num('ready-down-seconds', 1) * 1000,
    concurrency: Math.floor(num('concurrency', 1)),
    csiSocket: csiSocket || undefined,
    registrationDir: get('registration-dir') || undefined,
    followKinds: parseFollowKinds(get('follow-kinds')),
    ownerRefreshMs: num('owner-refresh-seconds', 1) * 1000,
    annotationQps: num('annotation-qps', 0.1),
  };
}

export function runHelp(): string {
  return flagHelp('ownerrefs-agent run [flags]', 'Watch this node\'s pods and keep the ownerReferences they read current: their annotations, and the files of\nvolumes that opt in.', RUN_FLAGS);
}
