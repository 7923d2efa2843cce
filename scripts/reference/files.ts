// docs/reference/files.md: the files the agent keeps in a pod's volumes (names, when each is
// written, its format, an example rendered by the projections' own code), and the reasons
// a controller chain ends with.

import { SYNC_RETRY } from '../../agent/common/defaults.ts';
import { RUN_FLAGS } from '../../agent/config.ts';
import { NODE_LABELS } from '../../agent/node/nodeconfig.ts';
import { RETRY_MAX_MS, RETRY_MS } from '../../agent/owners/ownermeta.ts';
import { MAX_CHAIN } from '../../agent/owners/chain.ts';

import { CHAIN_END_REASONS, keepWhileUnsettled, type ChainEnd } from '../../projections/chain.ts';

import { ENV_VAR_NAME } from '../../projections/env.ts';
import { FILE_MODE, FILES, project, type ProjectionOptions } from '../../projections/index.ts';
import { block, code, describeAll, header, seconds, sentence, table } from './common.ts';
import { SAMPLE_CHAIN, SAMPLE_NODE, SAMPLE_POD } from './sample.ts';
import { ANNOTATION_VOLUME, EXTENSION_FIELDS, OWNER_REFERENCES_FIELD } from '../../projections/names.ts';

interface FileDoc {
  /** The node setting that turns the file on or off; none: always written. */
  option?: keyof ProjectionOptions;
  content: string;
}

/** Keyed by FILES' keys: describeAll fails when a file is added or removed there. */
const FILE_DOCS: Record<string, FileDoc> = {
  ownerReferences: {
    content: 'The KEP document, byte for byte what Go\'s `encoding/json` writes for `{"kind":"OwnerReference","apiVersion":"meta/v1","items":[...]}` around `[]metav1.OwnerReference`: compact, no trailing newline; item keys `apiVersion`, `kind`, `name`, `uid`, `controller`, `blockOwnerDeletion`, the two booleans left out when the pod\'s reference has none and written when it has one (`false` too); Go\'s escaping (`<`, `>`, `&`, U+2028 and U+2029 as `\\u003c`-style escapes). No owners: `"items":[]`.',
  },
  env: {
    option: 'envFile',
    content: `One line, \`${ENV_VAR_NAME}='<the same JSON>'\`, and a newline, single-quoted for POSIX sh: \`set -a; . ./${FILES.env}\` exports exactly the JSON, whatever the owners' fields contain.`,
  },
  dependents: {
    option: 'dependentsFile',
    content: 'A JSON array ready for the `metadata.ownerReferences` of objects the pod creates: its owners without `controller` and `blockOwnerDeletion`. Copied verbatim, the KEP items would claim that the owner\'s controller manages the new object, and the API server\'s `OwnerReferencesPermissionEnforcement` refuses `blockOwnerDeletion` unless the pod may update the owner\'s finalizers.',
  },
  chain: {
    option: 'followOwners',
    content: 'The pod\'s chain of controlling owners, nearest first, following `controller: true` upward: `{"kind":"ControllerChain","apiVersion":"ownerrefs.dev/v1","items":[...],"end":{"reason":"...","message":"..."}}`, each item Go\'s encoding of `metav1.OwnerReference` as the child carries it. `end.reason` says why the chain stops ([below](#chain-end-reasons)), for programs; `end.message`, for people. Owners are read with `rbac-follow-owners.yaml`\'s permissions.',
  },
  workload: {
    option: 'followOwners',
    content: `The top of the chain alone, ready to paste (as \`${FILES.dependents}\`): the Deployment of a ReplicaSet's pod, the CronJob of a Job's pod, the StatefulSet or DaemonSet itself. \`[]\` when the chain did not reach its top: no guessing from names.`,
  },
  node: {
    option: 'nodeFile',
    content: 'The pod\'s Node as an owner, `[{"apiVersion":"v1","kind":"Node","name":...,"uid":...}]`, ready to paste: for objects that should live as long as the node and be collected with it, not as long as the pod or its DaemonSet. From the Node the agent already watches: no extra request, no extra RBAC.',
  },
};

function writtenWhen(option: keyof ProjectionOptions | undefined): string {
  if (!option) return 'always';
  const label = NODE_LABELS.find((l) => l.key === option);
  if (!label) throw new Error(`scripts/reference: no node label sets ${option}`);
  return label.default ? `unless the node is labelled \`${label.label}=false\`` : `on nodes labelled \`${label.label}=true\``;
}

/** Whether a chain file in place stays while the chain ends with `reason` (keepWhileUnsettled). */
function kept(reason: ChainEnd): boolean {
  return keepWhileUnsettled({ items: SAMPLE_CHAIN.items.slice(0, 1), end: { reason, message: '' } }, FILES.chain) !== undefined;
}

export function filesPage(): string {
  const all: ProjectionOptions = { envFile: true, dependentsFile: true, nodeFile: true, followOwners: true };
  const sample = project(SAMPLE_POD, all, { node: SAMPLE_NODE, chain: SAMPLE_CHAIN });
  const order = sample.map((f) => f.path);
  if (order.at(-1) !== FILES.ownerReferences) throw new Error(`scripts/reference: ${FILES.ownerReferences} is no longer written last`);
  const files = describeAll('files', Object.keys(FILES), FILE_DOCS).map(([key, d]) => [code(FILES[key as keyof typeof FILES]), writtenWhen(d.option), d.content]);
  const ends = Object.entries(CHAIN_END_REASONS) as [ChainEnd, string][];
  const unsettled = ends.filter(([r]) => kept(r)).map(([r]) => code(r));
  const itemFields = [[OWNER_REFERENCES_FIELD, FILES.ownerReferences], ...Object.entries(EXTENSION_FIELDS).map(([k, f]) => [f, FILES[k as keyof typeof EXTENSION_FIELDS]])];
  return `${header(['projections/index.ts', 'projections/chain.ts', 'agent/node/nodeconfig.ts'])}
# Files

What the agent keeps in each volume a pod opts in with: the \`emptyDir\` volumes its
${code(ANNOTATION_VOLUME)} annotation names ([annotations](annotations.md)), and its
\`ownerrefs.dev\` CSI volumes.

${table(['File', 'Written', 'Content'], files)}

Each is a regular file, mode \`${FILE_MODE.toString(8).padStart(4, '0')}\` (readable by any uid in the
pod), replaced atomically: written to a temporary and renamed over its name, so a reader sees
the old or the new content, never a partial, empty or missing file. After every rename the
agent checks, by inode, that the name holds the file it wrote: a process in the pod that swaps
the temporary for something else in between gets a \`NameTaken\` Event, and the file is
written again on the retry (${seconds(SYNC_RETRY.initialMs)} later at first). Each file is atomic on its own; they are
written in the order ${order.map(code).join(', ')}, so once ${code(FILES.ownerReferences)}
exists the others do too. A file a node label turns off is removed, if the agent wrote it.

## Chain end reasons

${table(['`end.reason`', 'Meaning'], ends.map(([r, meaning]) => [code(r), sentence(meaning)]))}

The agent follows at most ${MAX_CHAIN} owners. An owner that could not be read
(\`Unavailable\`) is read again after ${seconds(RETRY_MS)}, backing off to ${seconds(RETRY_MAX_MS)}.
While the chain ends ${unsettled.join(' or ')}, it knows its first owners only: a
${code(FILES.chain)} file already in place that agrees with them stays as it is, with the
${code(FILES.workload)} file beside it, so an agent restart or a failing read never turns a
known workload into \`[]\`. When the pod's own controller changed, both change at once.

How current the chain is: the pod's own owners change on the pod's watch event, as for every
file. An owner's owners are read once per owner per node (metadata only, from the API
server's watch cache, shared by every pod with that owner) and read again
\`--owner-refresh-seconds\` (default ${RUN_FLAGS['owner-refresh-seconds'].def}) after the last read while pods still use it, so an
owner's change of its own owner shows within 1.25 times that.

## Volume items

A \`downwardAPI\` volume in KEP-4753's syntax can ask for these files as items, by field
path; the webhook makes that valid ([annotations](annotations.md)). On a node that does not
follow owners the chain item says \`NotFollowed\` and the workload item is \`[]\`.

${table(['Field path', 'The content of'], itemFields.map(([field, file]) => [code(field!), code(file!)]))}

## Example

The files of a Deployment's pod on \`node-1\`, on a node that follows owners.

${sample.map((f) => `${code(f.path)}:\n\n${block(f.bytes.toString('utf8'), f.path === FILES.env ? 'text' : 'json')}`).join('\n\n')}
`;
}
