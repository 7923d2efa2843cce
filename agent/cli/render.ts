// `ownerrefs-agent render`: what would the agent write for this pod? Reads one Pod
// manifest (YAML or JSON), prints {file: content} or writes the files into a
// directory through the agent's own writer.

import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { project, type PodMeta } from '../../projections/index.ts';
import { FsVolumeWriter } from '../volume/writer.ts';

export const RENDER_HELP = `Usage: ownerrefs-agent render [--out DIR] [--no-env-file] [--no-dependents-file] [FILE|-]

Render the files the agent would write for one Pod manifest (YAML or JSON; "-" or
no FILE reads standard input). Without --out, prints a JSON object mapping each
file name to its content. With --out DIR, writes the files into DIR (which must
exist) through the agent's own atomic, symlink-safe writer.
`;

export async function render(argv: string[], stdin: NodeJS.ReadableStream, stdout: NodeJS.WritableStream): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      out: { type: 'string' },
      'no-env-file': { type: 'boolean' },
      'no-dependents-file': { type: 'boolean' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 1) throw new Error('render takes at most one FILE');
  const source = positionals[0];
  const text = source === undefined || source === '-' ? await readStream(stdin) : await fs.readFile(source, 'utf8');
  const pod = parseYaml(text) as PodMeta & { kind?: string };
  if (typeof pod !== 'object' || pod === null) throw new Error('input is not a YAML or JSON object');
  if (pod.kind !== undefined && pod.kind !== 'Pod') throw new Error(`input is a ${pod.kind}, not a Pod`);
  const files = project(pod, { envFile: !values['no-env-file'], dependentsFile: !values['no-dependents-file'] });
  if (values.out !== undefined) {
    await new FsVolumeWriter().sync({ root: path.resolve(values.out), components: [] }, files);
    stdout.write(files.map((f) => path.join(values.out!, f.path)).join('\n') + '\n');
    return;
  }
  stdout.write(JSON.stringify(Object.fromEntries(files.map((f) => [f.path, f.bytes.toString('utf8')])), null, 2) + '\n');
}

async function readStream(s: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}
