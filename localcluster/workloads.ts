// Workloads the tests and benchmarks run on a local cluster, built as a user would write them.

import type { V1DaemonSet } from '@kubernetes/client-node';
import { ANNOTATION_VOLUME } from '../projections/names.ts';

/** A DaemonSet whose pods opt in with an emptyDir "podinfo". */
export function podinfoDaemonSet(name: string, labels: Record<string, string> = { app: name }): V1DaemonSet {
  return {
    metadata: { name },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: { [ANNOTATION_VOLUME]: 'podinfo' } },
        spec: {
          tolerations: [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 0,
          containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true }] }],
          volumes: [{ name: 'podinfo', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
        },
      },
    },
  };
}
