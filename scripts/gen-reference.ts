// Writes docs/reference/: the command line, metrics, annotations, node labels, Events and
// files, each generated from the code that defines them (scripts/reference/*.ts), so that
// the reference cannot say something the program does not. test/packaging/reference.test.ts
// regenerates every page and fails when a committed one differs.
//   npm run gen:reference
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { annotationsPage } from './reference/annotations.ts';
import { commandLinePage } from './reference/commands.ts';
import { header, table } from './reference/common.ts';
import { eventsPage } from './reference/events.ts';
import { filesPage } from './reference/files.ts';
import { nodeLabelsPage } from './reference/labels.ts';
import { metricsPage } from './reference/metrics.ts';

export const REFERENCE_DIR = path.join(import.meta.dirname, '..', 'docs', 'reference');

const PAGES: readonly { file: string; title: string; what: string; make: () => string | Promise<string> }[] = [
  { file: 'command-line.md', title: 'Command line', what: 'Every command of `ownerrefs-agent`, its `--help`, the flags of `run` and `webhook` with their environment variables and defaults, and the exit codes.', make: commandLinePage },
  { file: 'metrics.md', title: 'Metrics', what: 'Every metric the agent and the webhook export: name, type, labels, meaning.', make: metricsPage },
  { file: 'annotations.md', title: 'Annotations', what: 'The pod annotations KEP-4753\'s syntax reads, the opt-in annotation, and the webhook Secret\'s.', make: annotationsPage },
  { file: 'node-labels.md', title: 'Node and namespace labels', what: 'The Node labels that configure the agent on that node, live, and the namespace label that forbids reading owners.', make: nodeLabelsPage },
  { file: 'events.md', title: 'Events', what: 'Every Warning Event reason, and the failure reasons an `OwnerRefsProjectionFailed` Event carries.', make: eventsPage },
  { file: 'files.md', title: 'Files', what: 'The files the agent writes in a pod\'s volumes, their format, and why a controller chain ends.', make: filesPage },
];

function indexPage(): string {
  return `${header(['scripts/gen-reference.ts'])}
# Reference

Generated from the code (\`npm run gen:reference\`): each page says what the program does,
in the words and with the values it uses itself.

${table(['Page', 'What'], [
  ...PAGES.map((p) => [`[${p.title}](${p.file})`, p.what]),
  ['[Chart values](../../charts/ownerrefs-agent/README.md)', 'Every value of the Helm chart, its type and default (generated from `values.schema.json` and `values.yaml`).'],
])}
`;
}

/** Every page, by file name in docs/reference/. */
export async function referencePages(): Promise<Record<string, string>> {
  const out: Record<string, string> = { 'README.md': indexPage() };
  for (const p of PAGES) out[p.file] = await p.make();
  return out;
}

if (import.meta.main) {
  const pages = await referencePages();
  mkdirSync(REFERENCE_DIR, { recursive: true });
  // A page no longer generated goes too: the directory is all generated.
  for (const f of readdirSync(REFERENCE_DIR)) if (!Object.hasOwn(pages, f)) rmSync(path.join(REFERENCE_DIR, f));
  for (const [f, text] of Object.entries(pages)) writeFileSync(path.join(REFERENCE_DIR, f), text);
}
