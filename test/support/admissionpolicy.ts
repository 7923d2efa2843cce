// admission.mode=policy applied as a user applies it: the shipped admission-policy.yaml, created
// on the test's API server, and waited for until the API server enforces every policy in it.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { AdmissionregistrationV1Api, KubernetesObjectApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { ANNOTATIONS } from '../../projections/names.ts';
import { waitFor } from './cluster.ts';
import { kepSpec, workload, WORKLOAD_KINDS } from './podspecs.ts';

const SHIPPED = path.join(import.meta.dirname, '..', '..', 'admission-policy.yaml');

/** The objects of admission-policy.yaml, in its order. */
export const shipped = (): KubernetesObject[] => readFileSync(SHIPPED, 'utf8').split(/^---$/m).map((d) => parseYaml(d) as KubernetesObject);
/** rbac-follow-owners.yaml: what the workload's values need (the lifter reads the owners' owners). */
export const followOwnersRbac = (): KubernetesObject[] => readFileSync(path.join(import.meta.dirname, '..', '..', 'rbac-follow-owners.yaml'), 'utf8').split(/^---$/m)
  .map((d) => parseYaml(d) as KubernetesObject).filter((o) => o?.kind);
const POLICY_KINDS = ['MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'];
/** Its policies and bindings: the mutating ones, then the gate's bounding one. */
export const shippedPolicies = (): KubernetesObject[] => shipped().filter((o) => POLICY_KINDS.includes(o.kind!));
/** The gate's ServiceAccount and RBAC (its Deployment is run as a process here: localcluster/gateproc.ts). */
export const shippedGateRbac = (): KubernetesObject[] => shipped().filter((o) => ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind!));

/**
 * Whether the API server serves MutatingAdmissionPolicy at admissionregistration.k8s.io/v1 (GA
 * in 1.36), what admission.mode=auto asks before it picks the policies over the webhook.
 */
export async function servesPolicies(kc: KubeConfig): Promise<boolean> {
  const list = await kc.makeApiClient(AdmissionregistrationV1Api).getAPIResources();
  return list.resources.some((r) => r.name === 'mutatingadmissionpolicies');
}

export interface InstalledPolicies {
  /** What the API server stores for `obj` in the namespace: a server-side dry run, so admission runs and nothing is kept. */
  admitted(obj: Record<string, unknown>): Promise<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
  remove(): Promise<void>;
}

/**
 * Creates the shipped policies and bindings, and returns once each is enforced. The API server
 * loads each policy on its own, about a second after its creation, so a dry run of a Pod and of
 * a template of every workload kind (in `ns`) must be rewritten before this returns.
 */
export async function installPolicies(kc: KubeConfig, ns: string): Promise<InstalledPolicies> {
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const policies = shippedPolicies();
  for (const o of policies) await objects.create(o);
  const admitted = (obj: Record<string, unknown>) =>
    objects.create({ ...obj, metadata: { ...obj.metadata as object, namespace: ns } } as KubernetesObject, undefined, 'All') as Promise<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
  // Until a policy is loaded the API server alone answers, and refuses the field (422).
  const rewritten = (obj: Record<string, unknown>) => admitted(obj).then((o) => o, () => undefined);
  await waitFor(async () => {
    const pod = await rewritten({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'probe' }, spec: kepSpec() });
    if (pod?.metadata?.annotations?.[ANNOTATIONS.ownerReferences] === undefined) return undefined;
    for (const kind of WORKLOAD_KINDS) if (await rewritten(workload(kind, kepSpec())) === undefined) return undefined;
    return true;
  }, { describe: 'every admission policy enforced', timeoutMs: 60_000 });
  return {
    admitted,
    async remove() {
      const api = kc.makeApiClient(AdmissionregistrationV1Api);
      for (const o of policies) {
        const name = o.metadata!.name!;
        const del = { MutatingAdmissionPolicy: () => api.deleteMutatingAdmissionPolicy({ name }), MutatingAdmissionPolicyBinding: () => api.deleteMutatingAdmissionPolicyBinding({ name }),
          ValidatingAdmissionPolicy: () => api.deleteValidatingAdmissionPolicy({ name }), ValidatingAdmissionPolicyBinding: () => api.deleteValidatingAdmissionPolicyBinding({ name }) }[o.kind!];
        await del?.().catch(() => undefined);
      }
    },
  };
}
