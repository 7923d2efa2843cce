// `ownerrefs-agent render`: the agent's exact dry run for one Pod manifest. It runs the
// agent's own admission (policy/admission.ts: opt-in, the annotation's volumes, the size
// limit) and either prints the files the agent would write, or the refusals it would
// report as Warning Events, and writes nothing.
//
// Exit codes: 0 the files; 1 bad input (not a Pod manifest); 2 bad usage; 3 the agent
// would refuse this pod (each refusal on stderr as "Reason: message").

import { stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { MAX_BYTES } from '../common/defaults.ts';
import { ConfigError } from '../common/errors.ts';
import { describe, isDns1123Label, oneLine } from '../common/validation.ts';
import { DRIVER_NAME } from '../csi/driver.ts';
import { admit } from '../policy/admission.ts';
import { ANNOTATION_VOLUME } from '../volume/resolve.ts';
import { FsVolumeWriter } from '../volume/writer.ts';
import { parseQuantity } from '../../projections/quantity.ts';
import { InputError, parsePod, readInput } from './podinput.ts';

export const RENDER_HELP = `Usage: ownerrefs-agent render [--out DIR] [--volume NAME] [--allocatable cpu=Q,memory=Q] [--no-env-file] [--no-dependents-file] [--max-bytes N] [FILE|-]

The agent's dry run for one Pod manifest (YAML or JSON; "-" or no FILE reads standard
input). Prints a JSON object mapping each file name to the content the agent would write,
or, with --out DIR, writes the files into DIR (which must exist) through the agent's own
atomic, symlink-safe writer. A pod the agent would refuse (no opt-in, an invalid
annotation, a volume that is not an emptyDir, files over --max-bytes) gets the agent's
reasons on standard error, nothing is written, and the exit code is 3.

--volume NAME renders that volume: for an ownerrefs.dev CSI volume carrying downwardAPI
items (what the webhook makes of KEP-4753 syntax), its items, nested paths and modes
included; --allocatable gives the node's allocatable, which such items read for limits a
container does not set (default: none, so they read 0).
`;

/** Exit code for a pod the agent would refuse. */
export const EXIT_REFUSED = 3;
/** Stands in for metadata.uid, which a manifest does not carry (the API server assigns it). */
const PLACEHOLDER_UID = '00000000-0000-4000-8000-000000000000';

export async function render(argv: string[], stdin: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      out: { type: 'string' },
      'no-env-file': { type: 'boolean' },
      'no-dependents-file': { type: 'boolean' },
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
  const bytes = await readInput(source, stdin);
  const pod = parsePod(bytes);
  const a = admit(pod.metadata?.uid ? pod : { ...pod, metadata: { ...pod.metadata, uid: PLACEHOLDER_UID } }, {
    kubeletRoot: '/var/lib/kubelet', maxBytes, csiDriver: DRIVER_NAME,
    settings: { paused: false, envFile: !values['no-env-file'], dependentsFile: !values['no-dependents-file'], nodeFile: false, followOwners: false },
    allocatable,
  });
  const refusals = a.optedIn ? a.errors : [{ reason: 'NotOptedIn', message: `the pod has neither the ${ANNOTATION_VOLUME} annotation nor a csi volume of driver ${DRIVER_NAME}; the agent writes nothing for it` }];
  if (refusals.length > 0) {
    for (const e of refusals) stderr.write(`${e.reason}: ${oneLine(e.message)}\n`);
    return EXIT_REFUSED;
  }
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
    return 0;
  }
  stdout.write(JSON.stringify(Object.fromEntries(files.map((f) => [f.path, f.bytes.toString('utf8')])), null, 2) + '\n');
  return 0;
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
