// KEP-4753's own mitigation ("Risks and Mitigations": some environments may not want pods to
// see their ownerReferences): a ValidatingAdmissionPolicy that refuses, in the namespaces
// carrying a label, every Pod and pod template that reads a pod's owners, whichever way:
//   - a fieldRef in the KEP's syntax or to one of our annotations (validation runs after the
//     webhook's rewrite, so both are checked), built from the same CEL as the webhook's
//     matchConditions, so that the two agree on what "reads" means;
//   - an inline CSI volume of our driver (the files of CSI mode);
//   - the ownerrefs.dev/volume annotation (the files of emptyDir mode): its presence is the
//     opt-in (agent/files/volume/resolve.ts's optedIn), refused whatever it names, so that no
//     disagreement between CEL and the agent's parsing of the list lets a pod through.
// Only objects that start reading are refused: a CREATE, or an UPDATE of an object that read
// nothing before (a matchCondition on oldObject). Objects that already read their owners when
// the namespace was labelled may still be updated and deleted (the garbage collector's
// patches, finalizer removals, scaling, the agent's annotation patch); the pods they would
// create are refused. Off unless installed (the chart's forbidReading.enabled).

import { REWRITTEN_FIELDS } from '../../projections/annotations.ts';
import { ANNOTATION_KEYS, ANNOTATION_VOLUME, annotationField, DRIVER_NAME, FORBID_LABEL } from '../../projections/names.ts';
import { rulesByGroup, WORKLOAD_KINDS } from '../../projections/workloadkinds.ts';
import { celPath, celString, specUses } from './cel.ts';
import { validatingPolicy } from './vap.ts';

export const FORBID_POLICY_NAME = 'forbid-reading-owners.ownerrefs.dev';

const READS = [...Object.keys(REWRITTEN_FIELDS), ...ANNOTATION_KEYS.map(annotationField)];

/**
 * CEL: the pod template of `root` (object or oldObject) as a list of zero or one {metadata, spec},
 * one branch per place a pod spec lives (a Pod is its own template), each with the has()
 * guards that reach it.
 */
function templateOf(root: string): string {
  const places = [...new Set(WORKLOAD_KINDS.map((w) => w.podSpec.join('.')))].map((at) => WORKLOAD_KINDS.filter((w) => w.podSpec.join('.') === at));
  return places.reduceRight((rest, kinds) => {
    const template = kinds[0]!.podSpec.slice(0, -1);
    // A Pod is its own template: its branch is guarded by its spec.
    const guarded = template.length > 0 ? template : kinds[0]!.podSpec;
    const guard = guarded.map((_, i) => `has(${celPath(root, guarded.slice(0, i + 1))})`).join(' && ');
    return `(request.kind.kind in [${kinds.map((w) => celString(w.kind)).join(', ')}] && ${guard}) ? [dyn(${celPath(root, template)})] : ${rest}`;
  }, '[]');
}

/** The ways a pod template `t` reads its owners, each as CEL, with what the refusal says. */
const WAYS = {
  fieldRef: {
    test: (t: string) => `has(${t}.spec) && (${specUses(`${t}.spec`, READS)})`,
    says: 'through a fieldRef: remove every fieldRef to metadata.ownerReferences, ownerrefs.dev/... or metadata.annotations[\'ownerrefs.dev/...\']',
  },
  csi: {
    test: (t: string) => `has(${t}.spec) && has(${t}.spec.volumes) && ${t}.spec.volumes.exists(v, has(v.csi) && has(v.csi.driver) && v.csi.driver == '${DRIVER_NAME}')`,
    says: `through a CSI volume of the driver ${DRIVER_NAME}: remove that volume`,
  },
  emptyDir: {
    test: (t: string) => `has(${t}.metadata) && has(${t}.metadata.annotations) && '${ANNOTATION_VOLUME}' in ${t}.metadata.annotations`,
    says: `through the annotation ${ANNOTATION_VOLUME} (an emptyDir the agent fills): remove that annotation`,
  },
} as const;

/** The policy and its binding: namespaces labelled `label=true` refuse objects whose pods would start reading their owners. */
export function forbidReadingPolicy(label = FORBID_LABEL): Record<string, unknown>[] {
  const anyWay = (t: string) => Object.values(WAYS).map((w) => `(${w.test(t)})`).join(' || ');
  const operations = ['CREATE', 'UPDATE'];
  return validatingPolicy(FORBID_POLICY_NAME, {
    matchConstraints: {
      resourceRules: rulesByGroup(WORKLOAD_KINDS, (w) => [w.resource, ...w.specSubresources.map((r) => `${w.resource}/${r}`)])
        .map(({ apiGroups, apiVersions, resources }) => ({ apiGroups, apiVersions, operations, resources })),
    },
    // An UPDATE is checked only if the object read nothing before: what already reads its
    // owners may still be patched (and its finalizers removed, so that it can be deleted).
    matchConditions: [{
      name: 'starts-reading-owners',
      expression: `request.operation == 'CREATE' || !(${templateOf('oldObject')}).exists(t, ${anyWay('t')})`,
    }],
    variables: [{ name: 'template', expression: templateOf('object') }],
    validations: Object.values(WAYS).map((w) => ({
      expression: `!variables.template.exists(t, ${w.test('t')})`,
      message: `this namespace forbids pods from reading their owners (KEP-4753, namespace label ${label}=true); this one reads them ${w.says}`,
      reason: 'Forbidden',
    })),
  }, { namespaceSelector: { matchLabels: { [label]: 'true' } } });
}
