// docs/reference/node-labels.md: the Node labels that configure the agent on that node, and
// the namespace label of the policy that forbids reading owners.

import { REASON_INVALID_NODE_LABEL } from '../../agent/kube/events.ts';
import { NODE_LABELS } from '../../agent/node/nodeconfig.ts';
import { FORBID_POLICY_NAME } from '../../agent/manifests/forbidpolicy.ts';
import { code, header, sentence, table } from './common.ts';
import { FORBID_LABEL } from '../../projections/names.ts';

export function nodeLabelsPage(): string {
  const follow = NODE_LABELS.find((l) => l.key === 'followOwners')!.label;
  return `${header(['agent/node/nodeconfig.ts', 'agent/manifests/forbidpolicy.ts'])}
# Node and namespace labels

## Node labels

The agent watches its own Node and applies these labels live, without a restart. An absent
label means its default. A value other than \`true\` or \`false\` keeps the last good setting
and gives the Node a Warning Event ${code(REASON_INVALID_NODE_LABEL)} ([events](events.md)); so does
an \`ownerrefs.dev/\` label that is one of these but for case or dashes (\`ownerrefs.dev/followOwners\`
for ${code(follow)}), which is ignored.

${table(['Label', 'Values', 'Default', 'Effect'], NODE_LABELS.map((l) => [code(l.label), '`true`, `false`', code(String(l.default)), sentence(l.doc)]))}

To run the agent on some nodes only, the chart's \`nodeSelectorLabel\` value names a label the
DaemonSet's \`nodeSelector\` requires ([chart values](../../charts/ownerrefs-agent/README.md)).

## Namespace label

${table(['Label', 'Values', 'Effect'], [[code(FORBID_LABEL), '`true`',
  `With the chart's \`forbidReading.enabled=true\` (off by default), the ValidatingAdmissionPolicy ${code(FORBID_POLICY_NAME)} refuses, in namespaces with this label, every Pod and pod template that starts reading its owners: in KEP-4753's syntax, through the \`ownerrefs.dev/\` field paths, through the annotations ([annotations](annotations.md)), through an \`ownerrefs.dev\` CSI volume, or with the \`ownerrefs.dev/volume\` opt-in. Objects that read them already may still be updated and deleted. The chart's \`forbidReading.namespaceLabel\` names another label.`]])}
`;
}
