// The Helm chart's value matrix, shared by the packaging tests (helm template) and the
// e2e test (the API server's dry run).

import { execFileSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import { CHART } from '../../scripts/gen-manifests.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The value sets a test renders: every switch on and off, and a microk8s kubelet root. */
export const MATRIX: Record<string, string[]> = {
  defaults: [],
  'emptyDir only (CSI off)': ['--set', 'csi.enabled=false'],
  'webhook on': ['--set', 'webhook.enabled=true'],
  'following owners on, with a custom kind': ['--set', 'followOwners.rbac=true', '--set', 'followOwners.extraKinds[0]=argoproj.io/v1alpha1/Rollout=rollouts'],
  'everything on': ['--set', 'webhook.enabled=true', '--set', 'followOwners.rbac=true'],
  microk8s: ['--set', 'kubeletRootDir=/var/snap/microk8s/common/var/lib/kubelet', '--set', 'webhook.enabled=true', '--set', 'followOwners.rbac=true'],
  'SELinux type spc_t (OpenShift, docs/INSTALL.md)': ['--set', 'seLinuxType=spc_t'],
  "V8's optimising compilers on": ['--set', 'v8.optimizingCompilers=true'],
  'one webhook replica (no PodDisruptionBudget), its own priority class, debug logs': ['--set', 'webhook.enabled=true', '--set', 'webhook.replicas=1',
    '--set', 'webhook.priorityClassName=platform-critical', '--set', 'logLevel=debug'],
  'webhook TLS from cert-manager, with its own CA': ['--set', 'webhook.enabled=true', '--set', 'webhook.tls.mode=certManager'],
  "webhook TLS from cert-manager, the cluster's issuer": ['--set', 'webhook.enabled=true', '--set', 'webhook.tls.mode=certManager', '--set', 'webhook.tls.certManager.issuerRef.name=corp-ca',
    '--set', 'webhook.tls.certManager.issuerRef.kind=ClusterIssuer', '--set', 'webhook.tls.certManager.issuerRef.group=cert-manager.io'],
  'webhook TLS from an existing Secret, extra flags, no quota': ['--set', 'webhook.enabled=true', '--set', 'webhook.tls.mode=existingSecret', '--set', 'webhook.tls.existingSecret=my-tls',
    '--set', 'webhook.tls.caBundle=Y2E=', '--set', 'extraArgs[0]=--owner-refresh-seconds=120', '--set', 'webhook.extraArgs[0]=--owner-budget-ms=500', '--set', 'criticalPodsQuota.enabled=false'],
  'namespace not created, pinned digest, extras': ['--set', 'namespace.create=false', '--set', `image.digest=sha256:${'a'.repeat(64)}`,
    '--set', 'extraLabels.team=platform', '--set', 'podAnnotations.note=x', '--set', 'priorityClassName=', '--set', 'maxUnavailable=3'],
  'webhook on the node\'s network (an overlay CNI), failing open, behind a mirror, as a subchart': ['--set', 'webhook.enabled=true', '--set', 'webhook.hostNetwork=true',
    '--set', 'webhook.port=10260', '--set', 'webhook.failurePolicy=Ignore', '--set', 'webhook.timeoutSeconds=3', '--set', 'global.imageRegistry=mirror.example.com:5000',
    '--set-json', 'global.imagePullSecrets=[{"name":"mirror"}]', '--set', 'enabled=true'],
};

/** Each value set of the matrix, rendered into objects. */
export function renderMatrix(h: string): [string, Obj[]][] {
  return Object.entries(MATRIX).map(([name, args]) => [name, parseAllDocuments(execFileSync(h, ['template', 'ownerrefs-agent', CHART, ...args]).toString()).map((d) => d.toJS() as Obj).filter(Boolean)]);
}
