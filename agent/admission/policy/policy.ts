// The MutatingAdmissionPolicies (admissionregistration.k8s.io/v1, Kubernetes 1.36 and later)
// that admit KEP-4753's syntax with no server of ours: the API server applies their CEL itself.
// Built from the same tables as the webhook (projections/names.ts, annotations.ts,
// workloadkinds.ts) and matched by the same conditions (manifests/webhookconfig.ts), one
// policy per place a pod spec lives, each with its binding.
//
// What a policy does, as the webhook does it (admission/webhook/objects.ts):
//   1. every fieldRef whose path the API server refuses (metadata.ownerReferences and our
//      extension paths) is pointed at the annotation that holds its value, in env of every
//      container list, downwardAPI volume items and projected downwardAPI sources, at the
//      pod spec's place in each workload kind (CREATE and UPDATE; a Pod's at CREATE);
//   2. a Pod being created gets each annotation its spec reads that needs no read of another
//      object (the owners document, the controller's kind, name and uid), byte-identical to
//      render's, over any value its author wrote;
//   3. every other ownerrefs.dev/ annotation its author wrote is removed: those the agent
//      sets (the chain's values, the Node's) appear only once it has read them;
//   4. a Pod being created that reads a value of its controller chain, and is not bound yet,
//      gets SCHEDULING_GATE and GATED_LABEL: the chain's values need reads of the owners'
//      owners, which CEL cannot make, so the gate's lifter (admission/gate/) writes them and
//      lifts the gate, and no container of the pod starts without them.

import { CHAIN_KEYS, REWRITTEN_FIELDS } from '../../../projections/annotations.ts';
import { ANNOTATION_KEYS, ANNOTATIONS, annotationField, GATED_LABEL, SCHEDULING_GATE, WEBHOOK_CONFIG_NAME, type AnnotationKey } from '../../../projections/names.ts';
import { rulesByGroup, WORKLOAD_KINDS, type WorkloadKind } from '../../../projections/workloadkinds.ts';
import { MATCH } from '../../manifests/webhookconfig.ts';
import { celLiteral, celOwnerReferencesJson } from './celjson.ts';

export const POLICY_API_VERSION = 'admissionregistration.k8s.io/v1';

/** JSON Pointer (RFC 6901) of fixed segments. */
const pointer = (...parts: string[]) => parts.map((p) => '/' + p.replaceAll('~', '~0').replaceAll('/', '~1')).join('');

/** The policies, one per webhook of the configuration (the same kinds, the same match). */
const HOOKS = [...new Set(WORKLOAD_KINDS.map((w) => w.webhook))].map((name) => ({ name, kinds: WORKLOAD_KINDS.filter((w) => w.webhook === name) }));

/** CEL: the map from each rewritten field path to the annotation field path it becomes. */
const REWRITE_MAP = `{${Object.entries(REWRITTEN_FIELDS).map(([from, key]) => `${celLiteral(from)}: ${celLiteral(annotationField(key))}`).join(', ')}}`;

/** CEL: `x.?a.?b.orValue(dflt)`, a list or value that may be absent at any step. */
const opt = (root: string, path: readonly string[], dflt: string) => `${root}${path.map((p) => `.?${p}`).join('')}.orValue(${dflt})`;

/** CEL: an optional fieldRef's path, '' when absent. */
const refPath = (item: string, ...path: string[]) => opt(item, [...path, 'fieldPath'], "''");

/** CEL: every fieldRef of the pod spec `s` (at JSON Pointer `at`), as [pointer to its fieldPath, fieldPath] pairs flattened in a list of maps. */
function fieldRefs(s: string, at: string): string {
  const env = (list: string) => `${opt(s, [list], '[]')}.transformList(ci, c, ${opt('c', ['env'], '[]')}.transformList(ei, e, ${refPath('e', 'valueFrom', 'fieldRef')} != '', ` +
    `{'path': ${celLiteral(`${at}/${list}/`)} + string(ci) + '/env/' + string(ei) + '/valueFrom/fieldRef/fieldPath', 'fieldPath': string(e.valueFrom.fieldRef.fieldPath)})).flatten()`;
  const items = (src: string, base: string) => `${opt(src, ['downwardAPI', 'items'], '[]')}.transformList(ii, i, ${refPath('i', 'fieldRef')} != '', ` +
    `{'path': ${base} + '/downwardAPI/items/' + string(ii) + '/fieldRef/fieldPath', 'fieldPath': string(i.fieldRef.fieldPath)})`;
  const volumes = `${opt(s, ['volumes'], '[]')}.transformList(vi, v, ${items('v', `${celLiteral(`${at}/volumes/`)} + string(vi)`)} + ` +
    `${opt('v', ['projected', 'sources'], '[]')}.transformList(si, p, ${items('p', `${celLiteral(`${at}/volumes/`)} + string(vi) + '/projected/sources/' + string(si)`)}).flatten()).flatten()`;
  return `${env('containers')} + ${env('initContainers')} + ${env('ephemeralContainers')} + ${volumes}`;
}

/** The annotations a Pod's policy sets from the object alone, each with its CEL value. */
const SET_AT_CREATION: ReadonlyMap<AnnotationKey, string> = new Map<AnnotationKey, string>([
  [ANNOTATIONS.ownerReferences, 'variables.ownerReferences'],
  [ANNOTATIONS.controllerKind, `(size(variables.controllers) > 0 ? variables.controllers[0].kind : '')`],
  [ANNOTATIONS.controllerName, `(size(variables.controllers) > 0 ? variables.controllers[0].name : '')`],
  [ANNOTATIONS.controllerUid, `(size(variables.controllers) > 0 ? variables.controllers[0].uid : '')`],
]);

/** The field paths that read `key`: as written, or through a rewritten path. */
const pathsReading = (key: AnnotationKey) => [annotationField(key), ...Object.entries(REWRITTEN_FIELDS).filter(([, k]) => k === key).map(([p]) => p)];

/**
 * CEL: the annotation operations of a Pod being created (steps 2 and 3 above), as maps of
 * strings: JSONPatch is declared only in a mutation's own expression, not in variables.
 */
function annotationOps(): string {
  const reads = (key: AnnotationKey) => `[${pathsReading(key).map(celLiteral).join(', ')}].exists(p, p in variables.fieldPaths)`;
  const authored = (key: AnnotationKey) => `(has(object.metadata.annotations) && ${celLiteral(key)} in object.metadata.annotations)`;
  const sets = [...SET_AT_CREATION].map(([key, value]) =>
    `(${reads(key)} ? [{'op': 'add', 'path': ${celLiteral(pointer('metadata', 'annotations', key))}, 'value': string(${value})}] : [])`);
  const removes = ANNOTATION_KEYS.map((key) => {
    const kept = SET_AT_CREATION.has(key) ? ` && !(${reads(key)})` : '';
    return `(${authored(key)}${kept} ? [{'op': 'remove', 'path': ${celLiteral(pointer('metadata', 'annotations', key))}, 'value': ''}] : [])`;
  });
  return `(${[...removes, ...sets].join(' + ')})`;
}

/** CEL: does the Pod read a value of its controller chain, and is it unbound (the API server refuses a gate on a bound pod)? */
const GATED = `[${[...CHAIN_KEYS].flatMap(pathsReading).map(celLiteral).join(', ')}].exists(p, p in variables.fieldPaths) && ${opt('object.spec', ['nodeName'], "''")} == ''`;

/** CEL: step 4's operations, JSONPatch values (a typed gate, the labels map made first when the pod has none). */
// The list is made empty first, then the gate appended: the API server fails on a list of
// typed objects as one value.
const GATE_OPS = `(variables.gated ? ` +
  `(has(object.spec.schedulingGates) ? [] : [JSONPatch{op: 'add', path: '/spec/schedulingGates', value: []}]) + ` +
  `[JSONPatch{op: 'add', path: '/spec/schedulingGates/-', value: Object.spec.schedulingGates{name: ${celLiteral(SCHEDULING_GATE)}}}] + ` +
  `(has(object.metadata.labels) ? [] : [JSONPatch{op: 'add', path: '/metadata/labels', value: {}}]) + ` +
  `[JSONPatch{op: 'add', path: ${celLiteral(pointer('metadata', 'labels', GATED_LABEL))}, value: ''}] : [])`;

/** The policy for one webhook's kinds. */
function policy(name: WorkloadKind['webhook'], kinds: readonly WorkloadKind[]): Record<string, unknown> {
  const pod = kinds.every((w) => w.kind === 'Pod');
  const podSpec = kinds[0]!.podSpec;
  const specOps = `variables.fieldRefs.filter(r, r.fieldPath in variables.rewrite).map(r, JSONPatch{op: 'replace', path: r.path, value: variables.rewrite[r.fieldPath]})`;
  const variables = [
    { name: 'rewrite', expression: REWRITE_MAP },
    { name: 'fieldRefs', expression: fieldRefs(`object.${podSpec.join('.')}`, pointer(...podSpec)) },
    ...pod ? [
      { name: 'fieldPaths', expression: 'variables.fieldRefs.map(r, r.fieldPath)' },
      { name: 'owners', expression: opt('object.metadata', ['ownerReferences'], '[]') },
      { name: 'controllers', expression: `variables.owners.filter(o, ${opt('o', ['controller'], 'false')})` },
      { name: 'ownerReferences', expression: celOwnerReferencesJson('variables.owners') },
      { name: 'annotationOps', expression: annotationOps() },
      { name: 'gated', expression: GATED },
    ] : [],
  ];
  // A Pod's annotations map is made first when the pod has none and one is to be set.
  const expression = pod
    ? `${specOps} + (size(variables.annotationOps) > 0 && !has(object.metadata.annotations) ? [JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}] : []) + variables.annotationOps.map(o, o.op == 'remove' ? JSONPatch{op: 'remove', path: o.path} : JSONPatch{op: 'add', path: o.path, value: o.value}) + ${GATE_OPS}`
    : specOps;
  const operations = pod ? ['CREATE'] : ['CREATE', 'UPDATE'];
  return {
    apiVersion: POLICY_API_VERSION,
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: policyName(name), labels: LABELS },
    spec: {
      matchConstraints: { resourceRules: rulesByGroup(kinds, (w) => [w.resource]).map((r) => ({ ...r, operations, scope: 'Namespaced' })) },
      matchConditions: [{ name: 'uses-kep-4753-syntax', expression: MATCH[name] }],
      variables,
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression } }],
      // Without the rewrite the API server refuses the syntax, and a pod admitted without its
      // annotation would start with an empty value: a policy that fails refuses.
      failurePolicy: 'Fail',
      // One run per object: its own patch never makes it match again, and other mutators run after it.
      reinvocationPolicy: 'Never',
    },
  };
}

const LABELS = { 'app.kubernetes.io/name': 'ownerrefs-admission-policy' };

/** The name of the policy (and of its binding) for a webhook's kinds: `pods.ownerrefs.dev`, like the webhook's. */
export const policyName = (name: WorkloadKind['webhook']) => `${name}.${WEBHOOK_CONFIG_NAME}`;

export interface PolicyOptions {
  /** Bind the policies to the namespaces this selects only (a staged rollout; the benchmark's arms). By default, every namespace. */
  namespaceSelector?: Record<string, unknown>;
}

/** Every policy and its binding, in order: what `kubectl apply -f admission-policy.yaml` installs. */
export function admissionPolicies(opts: PolicyOptions = {}): Record<string, unknown>[] {
  return HOOKS.flatMap(({ name, kinds }) => [policy(name, kinds), {
    apiVersion: POLICY_API_VERSION,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: policyName(name), labels: LABELS },
    // No namespace selector: every namespace's objects, the agent's own too (no server of ours to wait for).
    spec: { policyName: policyName(name), ...opts.namespaceSelector ? { matchResources: { namespaceSelector: opts.namespaceSelector } } : {} },
  }]);
}
