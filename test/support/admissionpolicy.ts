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
export const shippedPolicies = (): KubernetesObject[] => readFileSync(SHIPPED, 'utf8').split(/^---$/m).map((d) => parseYaml(d) as KubernetesObject);

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
  const shipped = shippedPolicies();
  for (const o of shipped) await objects.create(o);
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
      for (const o of shipped) {
        const name = o.metadata!.name!;
        await (o.kind === 'MutatingAdmissionPolicy' ? api.deleteMutatingAdmissionPolicy({ name }) : api.deleteMutatingAdmissionPolicyBinding({ name })).catch(() => undefined);
      }
    },
  };
}
