// Command-line and environment configuration for `ownerrefs-agent webhook`.

import { ConfigError } from '../../common/errors.ts';
import { flagHelp, hostPort, logLevel, parseFlags } from '../../common/flags.ts';
import { parseFollowKinds, type FollowedKind } from '../../owners/ownermeta.ts';
import { WEBHOOK_TIMEOUT_SECONDS } from '../../common/defaults.ts';
import { WEBHOOK_CONFIG_NAME, WEBHOOK_NAMESPACE } from '../../../projections/names.ts';

/**
 * --owner-budget-ms stays under this: the API server gives the webhook WEBHOOK_TIMEOUT_SECONDS, and
 * with failurePolicy Fail a review that outlasts it refuses the pod. 500 ms are the rest of
 * the review's (the walk, the patch, the network).
 */
export const MAX_OWNER_BUDGET_MS = WEBHOOK_TIMEOUT_SECONDS * 1000 - 500;

export interface WebhookConfig {
  listenHost: string;
  listenPort: number;
  healthHost: string;
  healthPort: number;
  kubeconfig: string | undefined;
  logLevel: string;
  /** Serve these files (cert-manager or your own PKI), re-read when they change; else self-managed. */
  certFile: string | undefined;
  keyFile: string | undefined;
  namespace: string;
  service: string;
  secret: string;
  configName: string;
  /** Extra names for the serving certificate (tests: 127.0.0.1). */
  extraSans: string[];
  /** Pods that read the chain's values: how long an admission may wait for owner reads. */
  ownerBudgetMs: number;
  ownerRefreshMs: number;
  maxOwners: number;
  followKinds: FollowedKind[];
  /** After SIGTERM: how long it keeps answering, unready, before it stops (see command.ts). */
  shutdownDelayMs: number;
}

/** Flag name, env var, default, help (one line: --help prints it). docs/reference/command-line.md is generated from these. */
export const WEBHOOK_FLAGS = {
  listen: { env: 'OWNERREFS_WEBHOOK_LISTEN', def: ':9443', help: 'host:port for HTTPS: the API server\'s calls (POST /mutate)' },
  'health-addr': { env: 'OWNERREFS_HEALTH_ADDR', def: ':8081', help: 'host:port for /healthz, /readyz and /metrics (plain HTTP)' },
  kubeconfig: { env: 'KUBECONFIG', def: '', help: 'kubeconfig file; empty means the pod\'s service account (in-cluster)' },
  'log-level': { env: 'LOG_LEVEL', def: 'info', help: 'trace, debug, info, warn, error or fatal' },
  'tls-cert-file': { env: 'OWNERREFS_TLS_CERT_FILE', def: '', help: 'serve this certificate (PEM; cert-manager\'s tls.crt); empty: self-managed CA in --secret' },
  'tls-key-file': { env: 'OWNERREFS_TLS_KEY_FILE', def: '', help: 'its private key (PEM; cert-manager\'s tls.key); both files are re-read when they change' },
  namespace: { env: 'POD_NAMESPACE', def: WEBHOOK_NAMESPACE, help: 'the webhook\'s namespace (the Secret lives here)' },
  service: { env: 'OWNERREFS_WEBHOOK_SERVICE', def: 'ownerrefs-webhook', help: 'the Service in front of the webhook: the certificate names it' },
  secret: { env: 'OWNERREFS_WEBHOOK_SECRET', def: 'ownerrefs-webhook-tls', help: 'self-managed mode: the Secret holding the CA and serving pair, which the webhook makes and renews' },
  'webhook-config': { env: 'OWNERREFS_WEBHOOK_CONFIG', def: WEBHOOK_CONFIG_NAME, help: 'self-managed mode: the MutatingWebhookConfiguration whose caBundle is kept current' },
  'extra-san': { env: 'OWNERREFS_WEBHOOK_EXTRA_SAN', def: '', help: 'comma-separated extra DNS names or IPs for the self-managed certificate' },
  'owner-budget-ms': { env: 'OWNERREFS_OWNER_BUDGET_MS', def: '1000', help: 'a pod that reads its workload: the longest one admission waits for owner reads (then the values say Pending and the agent fills them in); under 4500, the API server\'s 5 s timeout less 500 ms' },
  'owner-refresh-seconds': { env: 'OWNERREFS_OWNER_REFRESH_SECONDS', def: '60', help: 'read an owner in use again after this long' },
  'max-owners': { env: 'OWNERREFS_MAX_OWNERS', def: '20000', help: 'owners held in the cache at most (the least lately used goes first)' },
  'shutdown-delay-seconds': { env: 'OWNERREFS_SHUTDOWN_DELAY_SECONDS', def: '5', help: 'after SIGTERM, keep answering (unready, each answer closing its connection) this long before stopping, while the API server stops calling this replica; under the pod\'s terminationGracePeriodSeconds' },
  'follow-kinds': { env: 'OWNERREFS_FOLLOW_KINDS', def: '', help: 'owner kinds to follow beyond the built-in workloads, group/version/Kind=resource,... (each needs get in rbac-follow-owners.yaml)' },
} as const;


export function parseWebhookConfig(argv: string[], env: NodeJS.ProcessEnv): WebhookConfig {
  const { get, num } = parseFlags(WEBHOOK_FLAGS, argv, env);
  const [listenHost, listenPort] = hostPort('listen', get('listen'));
  const [healthHost, healthPort] = hostPort('health-addr', get('health-addr'));
  const certFile = get('tls-cert-file') || undefined;
  const keyFile = get('tls-key-file') || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) throw new ConfigError('--tls-cert-file and --tls-key-file go together');
  const level = logLevel(get('log-level'));
  const followKinds = parseFollowKinds(get('follow-kinds'));
  const ownerBudgetMs = num('owner-budget-ms', 0);
  if (ownerBudgetMs >= MAX_OWNER_BUDGET_MS) {
    throw new ConfigError(`--owner-budget-ms must be under ${MAX_OWNER_BUDGET_MS} (the webhook's ${WEBHOOK_TIMEOUT_SECONDS} s timeout less 500 ms, past which pod creation fails); got ${JSON.stringify(get('owner-budget-ms'))}`);
  }
  return {
    ownerBudgetMs, ownerRefreshMs: num('owner-refresh-seconds', 1) * 1000, maxOwners: Math.floor(num('max-owners', 1)), followKinds,
    listenHost, listenPort, healthHost, healthPort, certFile, keyFile, logLevel: level, shutdownDelayMs: num('shutdown-delay-seconds', 0) * 1000,
    kubeconfig: get('kubeconfig') || undefined,
    namespace: get('namespace'), service: get('service'), secret: get('secret'), configName: get('webhook-config'),
    extraSans: get('extra-san').split(',').map((s) => s.trim()).filter(Boolean),
  };
}

export function webhookHelp(): string {
  return flagHelp('ownerrefs-agent webhook [flags]', 'Serve the mutating admission webhook that makes KEP-4753\'s fieldRef metadata.ownerReferences\nvalid in Pods and pod templates.', WEBHOOK_FLAGS);
}
