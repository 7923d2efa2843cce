// Fixture builders for pod specs in KEP-4753's syntax and the objects that carry them.

import { KEP_OWNERS } from './fixtures.ts';

export const OWNERS_FIELD = 'metadata.ownerReferences';

export const kepEnv = (name = 'OWNER_REFERENCES') => ({ name, valueFrom: { fieldRef: { fieldPath: OWNERS_FIELD } } });

export const kepVolume = (name = 'podinfo', extraItems: unknown[] = [], defaultMode?: number) => ({
  name,
  downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: OWNERS_FIELD } }, ...extraItems], ...(defaultMode === undefined ? {} : { defaultMode }) },
});

export function kepSpec(over: { env?: boolean; volume?: boolean; init?: boolean; ephemeral?: boolean; volumes?: unknown[] } = {}) {
  const c = (name: string) => ({ name, image: 'busybox', ...(over.env !== false ? { env: [{ name: 'PLAIN', value: 'x' }, kepEnv()] } : {}) });
  return {
    containers: [c('app')],
    ...(over.init ? { initContainers: [c('init')] } : {}),
    ...(over.ephemeral ? { ephemeralContainers: [c('debug')] } : {}),
    volumes: over.volumes ?? (over.volume !== false ? [{ name: 'scratch', emptyDir: {} }, kepVolume()] : []),
  };
}

export const kepPod = (spec = kepSpec(), owners = [KEP_OWNERS[0]!]) =>
  ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'kep', namespace: 'default', ownerReferences: owners }, spec });

/** Every kind with a pod template, wrapped around `spec`. */
export function workload(kind: string, spec: unknown): Record<string, unknown> {
  const template = { metadata: { labels: { app: 'x' } }, spec };
  const selector = { matchLabels: { app: 'x' } };
  const meta = { name: `kep-${kind.toLowerCase()}`, namespace: 'default' };
  switch (kind) {
    case 'Deployment': case 'ReplicaSet': case 'DaemonSet': return { apiVersion: 'apps/v1', kind, metadata: meta, spec: { selector, template } };
    case 'StatefulSet': return { apiVersion: 'apps/v1', kind, metadata: meta, spec: { selector, serviceName: 'x', template } };
    case 'Job': return { apiVersion: 'batch/v1', kind, metadata: meta, spec: { template: { ...template, spec: { ...(spec as object), restartPolicy: 'Never' } } } };
    case 'CronJob': return { apiVersion: 'batch/v1', kind, metadata: meta, spec: { schedule: '0 0 * * *', jobTemplate: { spec: { template: { ...template, spec: { ...(spec as object), restartPolicy: 'Never' } } } } } };
    case 'ReplicationController': return { apiVersion: 'v1', kind, metadata: meta, spec: { selector: { app: 'x' }, template } };
    case 'PodTemplate': return { apiVersion: 'v1', kind, metadata: meta, template };
    default: throw new Error(`no workload kind ${kind}`);
  }
}

export const WORKLOAD_KINDS = ['Deployment', 'ReplicaSet', 'StatefulSet', 'DaemonSet', 'Job', 'CronJob', 'ReplicationController', 'PodTemplate'] as const;
