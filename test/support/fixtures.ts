// Shared fixture builders for unit tests.

import { project, type OwnerReference, type ProjectedFile } from '../../projections/index.ts';
import { type PodView } from '../../agent/node/podview.ts';

export function owner(over: Partial<OwnerReference> = {}): OwnerReference {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    name: 'agent',
    uid: '6be1683f-da9c-4f68-9440-82376231cfa6',
    controller: true,
    blockOwnerDeletion: true,
    ...over,
  };
}

/** The KEP's two-owner example pod's owners. */
export const KEP_OWNERS: OwnerReference[] = [
  owner({ name: 'an-owned-pod-1722852739' }),
  owner({ name: 'an-owned-pod-1722852739', kind: 'Some-CRD' }),
];

export interface PodSpec {
  name?: string;
  namespace?: string;
  uid?: string;
  owners?: OwnerReference[] | null;
  annotation?: string | undefined;
  annotations?: Record<string, string>;
  volumes?: { name: string; emptyDir?: unknown; configMap?: unknown; hostPath?: unknown; csi?: { driver?: string; readOnly?: boolean } }[];
}

let counter = 0;

/** An opted-in pod with one emptyDir volume "podinfo", unless told otherwise. */
export function pod(s: PodSpec = {}): PodView {
  counter++;
  const annotations: Record<string, string> = { ...s.annotations };
  const annotation = 'annotation' in s ? s.annotation : 'podinfo';
  if (annotation !== undefined) annotations['ownerrefs.dev/volume'] = annotation;
  return {
    metadata: {
      name: s.name ?? `pod-${counter}`,
      namespace: s.namespace ?? 'default',
      uid: s.uid ?? `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`,
      annotations,
      ownerReferences: s.owners === null ? undefined : (s.owners ?? [owner()]),
    },
    spec: { volumes: s.volumes ?? [{ name: 'podinfo', emptyDir: { medium: 'Memory' } }] },
  };
}

/** Strings a hostile pod author might put in owner fields. */
export const HOSTILE_STRINGS: readonly string[] = [
  `it's`,
  `"quoted"`,
  '$(touch /tmp/pwned)',
  '`touch /tmp/pwned`',
  'back\\slash\\',
  '<script>&amp;</script>',
  'new\nline',
  'tab\tcr\rbs\bff\f',
  '\u0000\u0001\u001f\u007f',
  'ünïcödé 日本語 🎉',
  'sep\u2028\u2029',
  "'; rm -rf / #",
  '${HOME} $HOME \\$ !!',
  'lone \ud800 surrogate',
];

/** Every file the agent can write for a pod: all options on, a Node, and a chain to its top. */
export function allFiles(p: PodView): ProjectedFile[] {
  const owners = p.metadata?.ownerReferences ?? [];
  return project(p, { envFile: true, dependentsFile: true, nodeFile: true, followOwners: true }, {
    node: { name: 'node-1', uid: '0f0e0d0c-0000-4000-8000-000000000001' },
    chain: { items: owners.filter((o) => o.controller === true), end: { reason: 'Top', message: 'fixture' } },
  });
}
