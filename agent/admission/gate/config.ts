// Command-line and environment configuration for `ownerrefs-agent gate`.

import { flagHelp, hostPort, logLevel, parseFlags } from '../../common/flags.ts';
import { parseFollowKinds, type FollowedKind } from '../../owners/ownermeta.ts';

export interface GateConfig {
  healthHost: string;
  healthPort: number;
  kubeconfig: string | undefined;
  logLevel: string;
  /** Names this replica in its Events (reportingInstance): the pod's name. */
  instance: string;
  /** How long one walk waits for owner reads before the pod is retried (it stays gated meanwhile). */
  ownerBudgetMs: number;
  ownerRefreshMs: number;
  maxOwners: number;
  followKinds: FollowedKind[];
  /**
   * After SIGTERM, how long the lifter goes on lifting before it stops. The API server applies
   * a deleted policy for up to about a second: when every replica goes at once (uninstall, or
   * the switch from both to webhook), pods gated in that second are lifted by the stopping ones.
   */
  shutdownDelayMs: number;
}

/** Flag name, env var, default, help (one line: --help prints it). docs/reference/command-line.md is generated from these. */
export const GATE_FLAGS = {
  'health-addr': { env: 'OWNERREFS_HEALTH_ADDR', def: ':8081', help: 'host:port for /healthz, /readyz and /metrics (plain HTTP)' },
  kubeconfig: { env: 'KUBECONFIG', def: '', help: 'kubeconfig file; empty means the pod\'s service account (in-cluster)' },
  'log-level': { env: 'LOG_LEVEL', def: 'info', help: 'trace, debug, info, warn, error or fatal' },
  instance: { env: 'POD_NAME', def: 'ownerrefs-gate', help: 'this replica\'s name in the Events it posts (the Deployment sets the pod\'s name)' },
  'owner-budget-ms': { env: 'OWNERREFS_OWNER_BUDGET_MS', def: '10000', help: 'the longest one pod\'s walk waits for owner reads before it is retried; the pod stays gated meanwhile' },
  'owner-refresh-seconds': { env: 'OWNERREFS_OWNER_REFRESH_SECONDS', def: '60', help: 'read an owner in use again after this long' },
  'max-owners': { env: 'OWNERREFS_MAX_OWNERS', def: '20000', help: 'owners held in the cache at most (the least lately used goes first)' },
  'shutdown-delay-seconds': { env: 'OWNERREFS_SHUTDOWN_DELAY_SECONDS', def: '5', help: 'after SIGTERM, keep lifting (unready) this long before stopping, for the pods a policy being deleted still gates; under the pod\'s terminationGracePeriodSeconds' },
  'follow-kinds': { env: 'OWNERREFS_FOLLOW_KINDS', def: '', help: 'owner kinds to follow beyond the built-in workloads, group/version/Kind=resource,... (each needs get in rbac-follow-owners.yaml)' },
} as const;

export function parseGateConfig(argv: string[], env: NodeJS.ProcessEnv): GateConfig {
  const { get, num } = parseFlags(GATE_FLAGS, argv, env);
  const [healthHost, healthPort] = hostPort('health-addr', get('health-addr'));
  return {
    healthHost, healthPort, kubeconfig: get('kubeconfig') || undefined, logLevel: logLevel(get('log-level')), instance: get('instance'),
    ownerBudgetMs: num('owner-budget-ms', 0), ownerRefreshMs: num('owner-refresh-seconds', 1) * 1000, maxOwners: Math.floor(num('max-owners', 1)),
    followKinds: parseFollowKinds(get('follow-kinds')), shutdownDelayMs: num('shutdown-delay-seconds', 0) * 1000,
  };
}

export function gateHelp(): string {
  return flagHelp('ownerrefs-agent gate [flags]', 'Write the workload values of pods that admission.mode=policy gated, and lift their scheduling gate.', GATE_FLAGS);
}
