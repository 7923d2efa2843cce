// docs/reference/annotations.md: the pod annotations the KEP's syntax reads (their keys,
// the field paths that read them, who sets them, an example of each), the opt-in
// annotation, and the webhook Secret's annotation.

import { stringify } from 'yaml';
import { MAX_VOLUMES_PER_POD } from '../../agent/files/volume/resolve.ts';
import { NODE_LABELS } from '../../agent/node/nodeconfig.ts';
import { RETIRE_MS } from '../../agent/admission/webhook/certs.ts';
import { WEBHOOK_FLAGS } from '../../agent/admission/webhook/config.ts';
import { annotationValue, CHAIN_KEYS, REWRITTEN_FIELDS } from '../../projections/annotations.ts';
import { FILES } from '../../projections/index.ts';
import { code, describeAll, header, table } from './common.ts';
import { SAMPLE_CHAIN, SAMPLE_NODE, SAMPLE_OWNERS } from './sample.ts';
import { ANNOTATION_VOLUME, GATED_LABEL, RETIRING_ANNOTATION, SCHEDULING_GATE, ANNOTATIONS, annotationField, type AnnotationKey } from '../../projections/names.ts';

const UNRESOLVED = '`(unresolved: REASON)` while the chain stops short of its top (REASON its end: [files](files.md#chain-end-reasons))';

/** What each annotation holds, keyed by its name in ANNOTATIONS. */
const VALUES: Record<string, string> = {
  ownerReferences: `The KEP document: the pod's \`metadata.ownerReferences\`, byte for byte the \`${FILES.ownerReferences}\` file.`,
  chain: `The pod's chain of controlling owners, as the \`${FILES.chain}\` file.`,
  workload: `The top of the chain alone, ready to paste, as the \`${FILES.workload}\` file.`,
  node: `The pod's Node as an owner, ready to paste, as the \`${FILES.node}\` file.`,
  workloadKind: `The kind of the top of the chain (the workload: a Deployment's pod names its Deployment, a CronJob's Job's pod its CronJob); \`""\` for a pod with no controller; ${UNRESOLVED}.`,
  workloadName: `The name of the top of the chain; \`""\` for a pod with no controller; ${UNRESOLVED}.`,
  workloadUid: `The UID of the top of the chain; \`""\` for a pod with no controller; ${UNRESOLVED}.`,
  controllerKind: 'The kind of the pod\'s own controlling owner (a Deployment\'s pod: its ReplicaSet); `""` for none. Always known: it is on the pod.',
  controllerName: 'The name of the pod\'s own controlling owner; `""` for none.',
  controllerUid: 'The UID of the pod\'s own controlling owner; `""` for none.',
  otel: '`OTEL_RESOURCE_ATTRIBUTES` for any OpenTelemetry SDK: `k8s.<kind>.name=...,k8s.<kind>.uid=...` for each owner of the chain whose kind has resource attributes in the semantic conventions, nearest first, as far as the chain is known; values percent-encoded as the variable\'s W3C Baggage format asks.',
};

function setBy(key: AnnotationKey): string {
  if (key === ANNOTATIONS.node) return 'the agent, once the pod is bound to a node';
  if (CHAIN_KEYS.has(key)) return 'the webhook at creation (owners read within `--owner-budget-ms`, else `Pending`); the agent on the pod\'s node, on every node';
  return 'the webhook at creation; the agent on each change';
}

function readWith(key: AnnotationKey): string {
  const rewritten = Object.entries(REWRITTEN_FIELDS).filter(([, k]) => k === key).map(([field]) => `${code(field)} (the webhook points it at the annotation), or `);
  return `${rewritten.join('')}${code(annotationField(key))}`;
}

function examples(): string {
  const annotations: Record<string, string> = {};
  for (const key of Object.values(ANNOTATIONS)) {
    const v = annotationValue(key, SAMPLE_OWNERS, { node: SAMPLE_NODE, chain: SAMPLE_CHAIN });
    if (!v) throw new Error(`scripts/reference: the sample pod has no value for ${key}`);
    annotations[key] = v.value;
  }
  return stringify({ metadata: { annotations } }, { lineWidth: 0 }).trimEnd();
}

export function annotationsPage(): string {
  const rows = describeAll('pod annotations', Object.keys(ANNOTATIONS), VALUES).map(([name, value]) => {
    const key = ANNOTATIONS[name as keyof typeof ANNOTATIONS];
    return [code(key), readWith(key), value, setBy(key)];
  });
  const secret = WEBHOOK_FLAGS.secret.def;
  return `${header(['projections/annotations.ts', 'agent/files/volume/resolve.ts', 'agent/admission/webhook/certs.ts'])}
# Annotations

Every annotation under \`ownerrefs.dev/\`. Node and namespace labels: [node-labels.md](node-labels.md).

## Pod annotations the KEP's syntax reads

The admission webhook makes KEP-4753's \`fieldRef: {fieldPath: metadata.ownerReferences}\`
valid by pointing it at a pod annotation, and sets that annotation when the pod is created;
the agent on the pod's node keeps it current, and the kubelet renders it in volumes and env
as it renders any annotation. A pod carries only the annotations its spec reads, and a value
written there by hand is overwritten.

${table(['Annotation', 'Read with the field path', 'Value', 'Set by'], rows)}

The agent on every node keeps the workload's values current for the pods that read them (the
node label ${code(NODE_LABELS.find((l) => l.key === 'followOwners')!.label)} is the opt-in of the files alone).
No Kubernetes kind, name or UID contains a space or a parenthesis, so a program tells an
unresolved value from a name by its first character.

Example: the values for a Deployment's pod.

\`\`\`yaml
${examples()}
\`\`\`

## Other annotations

${table(['Annotation', 'On', 'Value', 'Meaning'], [
  [code(ANNOTATION_VOLUME), 'Pod (written by its author)', `a volume name, or a comma-separated list of at most ${MAX_VOLUMES_PER_POD}`,
    'Opt in: keep the files in these `emptyDir` volumes of the pod ([files](files.md)). Each name must be a DNS-1123 label naming an `emptyDir` in `spec.volumes`. Removing the annotation stops updates and leaves the files; so does dropping a volume from the list: the agent never deletes what a pod may be reading. (A pod with an `ownerrefs.dev` CSI volume needs no annotation.)'],
  [code(RETIRING_ANNOTATION), `the webhook's Secret (\`--secret\`, default ${code(secret)}), self-managed TLS`, 'comma-separated SHA-256 fingerprints',
    `Written by the webhook: the CAs in \`ca.crt\` that a new CA replaced. Each replica keeps trusting them for ${RETIRE_MS / 60_000} minutes after it first sees them listed, so a replica still serving the old pair keeps being called, then drops them.`],
])}

## Policy mode's scheduling gate

With \`admission.mode=policy\`, a Pod created reading a value of its controller chain (the
workload's name, uid or kind, the chain, \`workloadOwnerReferences\`, the OpenTelemetry
attributes), and not bound at creation, gets these from the MutatingAdmissionPolicy. The gate's
lifter (\`ownerrefs-agent gate\`) writes the values, then removes both in the same PATCH.

${table(['Name', 'On', 'Value', 'Meaning'], [
  [code(SCHEDULING_GATE), 'Pod \`spec.schedulingGates\`', '', 'No node is chosen, and no container starts, until the lifter has written the workload\'s values: the pod shows \`SchedulingGated\` meanwhile ([events](events.md) say what it waits for).'],
  [code(GATED_LABEL), 'Pod label', 'empty', 'What the lifter watches (every namespace, by this label alone): removed with the gate.'],
])}
`;
}
