// `ownerrefs-agent inject`: what the admission webhook would make of a manifest, offline,
// for review and for GitOps pipelines that pre-render (as istioctl kube-inject does):
// the same mutate() the webhook runs. Pods and pod templates of every served kind, YAML
// (multi-document) or JSON, a List's items too. Other objects pass through unchanged.
//
// Exit codes: 0 printed; 1 bad input; 2 bad usage; 3 the webhook would deny an object
// (its message on stderr, prefixed by the object; nothing printed).

import { parseArgs } from 'node:util';
import { ConfigError } from '../common/errors.ts';
import { displayName, oneLine } from '../common/validation.ts';
import { mutate } from '../admission/webhook/objects.ts';
import { workloadKindNamed } from '../../projections/workloadkinds.ts';
import { applyPatch } from './patch.ts';
import { readYamlDocuments, writeYaml, YamlDocumentError } from './input/kubectlyaml.ts';
import { decodeUtf8, InputError, readInput, yamlFailure } from './input/podinput.ts';
import { ANNOTATIONS } from '../../projections/names.ts';
import { isRecord } from '../../projections/types.ts';

export const INJECT_HELP = `Usage: ownerrefs-agent inject [-f FILE|-]

Prints what the ownerrefs.dev admission webhook would make of a manifest: KEP-4753's
fieldRef metadata.ownerReferences (and ownerrefs.dev's own field paths) in downwardAPI and
projected volumes and in env, pointed at the pod annotation that holds the value
(metadata.annotations['ownerrefs.dev/owner-references']), which today's API servers accept;
for a Pod, also the annotations its spec reads, as the webhook would set them. Reads YAML
(several documents) or JSON, at most 8 MiB, from FILE or standard input, and prints the
same format. Objects the webhook would deny are reported on standard error and the exit
code is 3. A workload's pods get their annotations at their own admission, so the webhook
must still be installed for them.
`;

export const EXIT_DENIED = 3;
/** Several objects, each at most what the API server takes in one request (3 MiB). */
export const MAX_INJECT_INPUT = 8 * 1024 * 1024;



export async function inject(argv: string[], stdin: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: { filename: { type: 'string', short: 'f', multiple: true } }, allowPositionals: true, strict: true });
  // A lone "-" is standard input, as the usage line shows (`inject -`, like `-f -`).
  const inputs = [...(values.filename ?? []), ...positionals.filter((p) => p === '-')];
  const stray = positionals.find((p) => p !== '-');
  if (stray !== undefined) throw new ConfigError(`inject takes its input with -f FILE (or standard input), not ${JSON.stringify(stray)}`);
  if (inputs.length > 1) throw new ConfigError(`inject reads one input; ${inputs.length} were given`);
  const source = inputs[0];
  const text = decodeUtf8(await readInput(source, stdin, MAX_INJECT_INPUT));
  if (text.trim() === '') throw new InputError('the input is empty; give a manifest (YAML or JSON)');
  const json = /^\s*[[{]/.test(text);
  let list: unknown[];
  try {
    list = readYamlDocuments(text);
  } catch (err) {
    const at = err instanceof YamlDocumentError ? `document ${err.index + 1}: ` : '';
    throw new InputError(`${at}${yamlFailure(err).replace(/^the input is /, '')}`);
  }
  const out: unknown[] = [];
  let denied = false;
  for (const [i, obj] of list.entries()) {
    if (obj === null || obj === undefined) continue;
    const r = injectObject(obj, `document ${i + 1}`, stderr);
    denied ||= r.denied;
    out.push(r.obj);
  }
  if (denied) return EXIT_DENIED;
  if (out.length === 0) throw new InputError('the input holds no object, only empty YAML documents');
  stdout.write(json ? out.map((o) => JSON.stringify(o, null, 2) + '\n').join('') : out.map((o) => writeYaml(o)).join('---\n'));
  return 0;
}

function injectObject(obj: unknown, where: string, stderr: NodeJS.WritableStream): { obj: unknown; denied: boolean } {
  if (!isRecord(obj)) throw new InputError(`${where} is not an object`);
  const kind = typeof obj.kind === 'string' ? obj.kind : '';
  if (kind === 'List' && Array.isArray(obj.items)) {
    let denied = false;
    const items = obj.items.map((item, i) => {
      const r = injectObject(item, `${where} item ${i + 1}`, stderr);
      denied ||= r.denied;
      return r.obj;
    });
    return { obj: { ...obj, items }, denied };
  }
  if (!workloadKindNamed(kind)) return { obj, denied: false };
  const meta = isRecord(obj.metadata) ? obj.metadata : {};
  const name = `${kind} ${meta.namespace ? `${displayName(meta.namespace)}/` : ''}${displayName(meta.name ?? meta.generateName ?? '')}`;
  const m = mutate(kind, obj);
  if (!m.allowed) {
    stderr.write(`${where} (${name}): denied: ${oneLine(m.message)}\n`); // it quotes the manifest's own keys
    return { obj, denied: true };
  }
  for (const w of m.warnings) stderr.write(`${where} (${name}): warning: ${oneLine(w)}\n`);
  if (kind === 'Pod' && m.annotations.includes(ANNOTATIONS.ownerReferences) && !Array.isArray(meta.ownerReferences)) {
    stderr.write(`${where} (${name}): warning: the manifest lists no ownerReferences, so its owners annotation says "items":[]; pods made by controllers carry theirs\n`);
  }
  return { obj: applyPatch(obj, m.patch), denied: false };
}
