// `ownerrefs-agent render`: the agent's exact dry run for one Pod manifest. It runs the
// agent's own admission (files/admission.ts: opt-in, the annotation's volumes, the size
// limit) with the agent's default settings, prints the files the agent would write when it
// would write any, and the Warning Events it would post, in the Events' own words.
//
// Exit codes: 0 the files, no Event; 1 bad input (not a Pod manifest); 2 bad usage; 3 the
// agent would post an Event for this pod (each on stderr), whether or not it writes files.

import { stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { MAX_BYTES } from '../common/defaults.ts';
import { ConfigError, eventText, ProjectionError } from '../common/errors.ts';
import { DEFAULT_SETTINGS } from '../node/nodeconfig.ts';
import { describe, isDns1123Label, oneLine } from '../common/validation.ts';

import { admit } from '../files/admission.ts';

import { FsVolumeWriter } from '../files/volume/writer.ts';
import { parseQuantity } from '../../projections/quantity.ts';
import { InputError, parsePod, readInput } from './input/podinput.ts';
import { DRIVER_NAME, ANNOTATION_VOLUME } from '../../projections/names.ts';

export const RENDER_HELP = `Usage: ownerrefs-agent render [--out DIR] [--volume NAME] [--node-name NAME] [--allocatable cpu=Q,memory=Q] [--no-env-file] [--no-dependents-file] [--no-node-file] [--max-bytes N] [FILE|-]

The agent's dry run for one Pod manifest (YAML or JSON, at most 3 MiB; "-" or no FILE
reads standard input), with the agent's default settings unless flags say otherwise.
Prints a JSON object mapping each file name to the content the agent would write, or,
with --out DIR, writes the files into DIR (which must exist) through the agent's own
atomic, symlink-safe writer. Each problem the agent would report as a Warning Event (an
invalid annotation, a volume that is not declared or not an emptyDir, files over
--max-bytes) is printed on standard error as the Event says it, and the exit code is 3.
The files are printed (or written) exactly when the agent would write them somewhere:
an annotation that names valid and invalid volumes gets its files in the valid ones.

nodeOwnerReferences names the node the pod is bound to (spec.nodeName), else --node-name
(default "node"), with a placeholder UID: its size counts toward --max-bytes, as on a node.

--volume NAME renders that volume: for an ownerrefs.dev CSI volume carrying downwardAPI
items, its items, nested paths and modes included; --allocatable gives the node's
allocatable, which such items read for limits a container does not set (default: none,
so they read 0).
`;

/** Exit code for a pod the agent would refuse. */
export const EXIT_REFUSED = 3;
/** Stands in for metadata.uid, which a manifest does not carry (the API server assigns it), and for the Node's. */
const PLACEHOLDER_UID = '00000000-0000-4000-8000-000000000000';
/** A Pod the API server would take: its own limit on a request body. */
export const MAX_RENDER_INPUT = 3 * 1024 * 1024;

export async function render(argv: string[], stdin: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      out: { type: 'string' },
      'no-env-file': { type: 'boolean' },
      'no-dependents-file': { type: 'boolean' },
      'no-node-file': { type: 'boolean' },
      'node-name': { type: 'string' },
      'max-bytes': { type: 'string' },
      volume: { type: 'string' },
      allocatable: { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 1) throw new ConfigError(`render takes at most one FILE, got ${positionals.length}`);
  const maxBytes = values['max-bytes'] === undefined ? MAX_BYTES : /^[0-9]{1,15}$/.test(values['max-bytes']) ? Number(values['max-bytes']) : NaN;
  if (!Number.isInteger(maxBytes) || maxBytes < 1024) throw new ConfigError(`--max-bytes must be a whole number >= 1024, got ${JSON.stringify(values['max-bytes'])}`);
  const allocatable = parseAllocatable(values.allocatable); // usage errors before reading any input
  const source = positionals[0];
  const bytes = await readInput(source, stdin, MAX_RENDER_INPUT);
  const pod = parsePod(bytes);
  const nodeName = (pod.spec as { nodeName?: unknown } | undefined)?.nodeName;
  // The agent's own defaults (a node without labels), changed only by the flags.
  const settings = {
    ...DEFAULT_SETTINGS,
    ...(values['no-env-file'] ? { envFile: false } : {}),
    ...(values['no-dependents-file'] ? { dependentsFile: false } : {}),
    ...(values['no-node-file'] ? { nodeFile: false } : {}),
  };
  const a = admit(pod.metadata?.uid ? pod : { ...pod, metadata: { ...pod.metadata, uid: PLACEHOLDER_UID } }, {
    kubeletRoot: '/var/lib/kubelet', maxBytes, csiDriver: DRIVER_NAME, settings, allocatable,
    context: { node: { name: typeof nodeName === 'string' && nodeName !== '' ? nodeName : values['node-name'] ?? 'node', uid: PLACEHOLDER_UID } },
  });
  if (!a.optedIn) {
    stderr.write(`NotOptedIn: the pod has neither the ${ANNOTATION_VOLUME} annotation nor a csi volume of driver ${DRIVER_NAME}; the agent writes nothing for it\n`);
    return EXIT_REFUSED;
  }
  // Exactly the agent's Events, in its words.
  for (const e of a.errors) stderr.write(`${oneLine(eventText(e))}\n`);
  const code = a.errors.length > 0 ? EXIT_REFUSED : 0;
  // The agent writes the files into each served volume (an annotated emptyDir, a CSI volume
  // the kubelet publishes), unless they are refused as a whole.
  const csiServed = (pod.spec?.volumes ?? []).some((v) => v.csi?.driver === DRIVER_NAME && !(a.volumeFiles.get(v.name) instanceof ProjectionError));
  if (a.tooLarge || (a.volumes.length === 0 && !csiServed)) return code;
  let files = a.files;
  if (values.volume !== undefined) {
    const own = a.volumeFiles.get(values.volume);
    const declared = (pod.spec?.volumes ?? []).some((v) => v.name === values.volume);
    if (!declared) throw new InputError(`the pod has no volume ${JSON.stringify(values.volume)}`);
    if (Array.isArray(own)) files = own;
  } else {
    for (const name of a.volumeFiles.keys()) {
      const shown = isDns1123Label(name) ? name : describe(name); // a name the pod chose: never raw on a terminal
      stderr.write(`note: volume ${shown} holds downwardAPI items, not these files; render it with --volume ${shown}\n`);
    }
  }
  if (values.out !== undefined) {
    // The user's own directory: said in their terms, before the writer's volume rules apply.
    const st = await stat(values.out).catch(() => undefined);
    if (!st?.isDirectory()) throw new InputError(`--out ${JSON.stringify(values.out)} ${st ? 'is not a directory' : 'does not exist; make the directory first'}`);
    await new FsVolumeWriter().sync({ root: path.resolve(values.out), components: [] }, files, [], { createTarget: false });
    stdout.write(files.map((f) => path.join(values.out!, f.path)).join('\n') + '\n');
    return code;
  }
  stdout.write(JSON.stringify(Object.fromEntries(files.map((f) => [f.path, f.bytes.toString('utf8')])), null, 2) + '\n');
  return code;
}

/** `cpu=4,memory=16Gi` -> a resource list; a quantity Kubernetes would not parse is bad usage. */
function parseAllocatable(v: string | undefined): Record<string, string> {
  if (v === undefined || v === '') return {};
  const out: Record<string, string> = {};
  for (const part of v.split(',')) {
    const m = /^([a-z0-9.\/-]+)=(\S+)$/.exec(part.trim());
    if (!m) throw new ConfigError(`--allocatable takes name=quantity pairs, like cpu=4,memory=16Gi; got ${JSON.stringify(part)}`);
    if (parseQuantity(m[2]!) === undefined) throw new ConfigError(`--allocatable: ${JSON.stringify(m[2])} is not a Kubernetes quantity (like 4, 500m, 16Gi)`);
    out[m[1]!] = m[2]!;
  }
  return out;
}
