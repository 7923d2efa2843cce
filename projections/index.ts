// project(): pod -> the files the agent keeps in each of the pod's volumes.
// Pure: no I/O, no clock. Mechanism (writer) and policy (agent) live elsewhere.

import { keepWhileUnsettled, renderChainJson, renderNodeOwnerJson, renderWorkloadJson, type ControllerChain, type NodeRef } from './chain.ts';
import { renderEnvLine, ENV_VAR_NAME } from './env.ts';
import { renderDependentsJson, renderOwnerReferencesJson } from './ownerreferences.ts';
import type { KeepRule, OwnerReference, PodMeta, ProjectedFile, ProjectionOptions } from './types.ts';

export type { KeepRule, OwnerReference, PodMeta, ProjectedFile, ProjectionOptions } from './types.ts';
export type { ChainEnd, ControllerChain, NodeRef } from './chain.ts';

/** File names inside the volume. Fixed: nothing pod-controlled ever becomes a path. */
export const FILES = {
  ownerReferences: 'ownerReferences',
  env: 'ownerReferences.env',
  dependents: 'dependentOwnerReferences',
  chain: 'controllerChain',
  workload: 'workloadOwnerReferences',
  node: 'nodeOwnerReferences',
} as const;

export const ALL_FILE_NAMES: readonly string[] = Object.values(FILES);

/** Readable by any uid in the pod; never writable by it. */
export const FILE_MODE = 0o644;

export const DEFAULT_PROJECTION_OPTIONS: ProjectionOptions = { envFile: true, dependentsFile: true, nodeFile: true, followOwners: false };

/** What the agent knows beyond the pod: its Node, and (when following owners) its controller chain. */
export interface ProjectionContext {
  node?: NodeRef | undefined;
  chain?: ControllerChain | undefined;
}

export function ownersOf(pod: PodMeta): readonly OwnerReference[] {
  return pod.metadata?.ownerReferences ?? [];
}

/**
 * The files for this pod, in write order. Disabled files are simply absent.
 * `ownerReferences` comes last: apps wait for it, so when it first appears the
 * others are already there.
 */
export function project(pod: PodMeta, opts: ProjectionOptions = DEFAULT_PROJECTION_OPTIONS, ctx: ProjectionContext = {}): ProjectedFile[] {
  const owners = ownersOf(pod);
  const json = renderOwnerReferencesJson(owners);
  const files: ProjectedFile[] = [];
  if (opts.envFile) files.push(file(FILES.env, renderEnvLine(ENV_VAR_NAME, json)));
  if (opts.dependentsFile) files.push(file(FILES.dependents, renderDependentsJson(owners)));
  if (opts.nodeFile && ctx.node) files.push(file(FILES.node, renderNodeOwnerJson(ctx.node)));
  if (opts.followOwners && ctx.chain) {
    const chainJson = renderChainJson(ctx.chain);
    const keep = keepWhileUnsettled(ctx.chain, FILES.chain, chainJson);
    files.push(file(FILES.chain, chainJson, keep?.chain));
    files.push(file(FILES.workload, renderWorkloadJson(ctx.chain), keep?.workload));
  }
  files.push(file(FILES.ownerReferences, json));
  return files;
}

function file(path: string, text: string, keep?: KeepRule): ProjectedFile {
  return { path, bytes: Buffer.from(text, 'utf8'), mode: FILE_MODE, ...(keep ? { keep } : {}) };
}
