// docs/reference/command-line.md: every command's --help as the program prints it, the
// flags of `run` and `webhook` as tables, and the exit codes.

import { DOCTOR_HELP } from '../../agent/cli/doctor.ts';
import { EXIT_DENIED, INJECT_HELP } from '../../agent/cli/inject.ts';
import { EXIT_REFUSED, RENDER_HELP } from '../../agent/cli/render.ts';
import { COMMANDS, EXIT, mainHelp, RUN_FLAGS, runHelp } from '../../agent/config.ts';
import { WEBHOOK_FLAGS, webhookHelp } from '../../agent/admission/webhook/config.ts';
import { GATE_FLAGS, gateHelp } from '../../agent/admission/gate/config.ts';
import { block, code, describeAll, header, sentence, table } from './common.ts';

interface Flag {
  env: string;
  def: string;
  help: string;
  doc?: string;
}

interface CommandDoc {
  help: () => string;
  /** Where the flags come from, for a table; absent for commands whose --help says it all. */
  flags?: Readonly<Record<string, Flag>>;
  /** Who runs it, and how. */
  intro: string;
}

/** Keyed by command: describeAll fails when COMMANDS gains or loses one. */
const DOCS: Record<string, CommandDoc> = {
  run: { help: runHelp, flags: RUN_FLAGS, intro: 'The agent itself: the DaemonSet runs it on every node.' },
  render: { help: () => RENDER_HELP, intro: 'The agent\'s dry run for one Pod manifest, for people and CI: the same admission code the agent runs on every pod event.' },
  webhook: { help: webhookHelp, flags: WEBHOOK_FLAGS, intro: 'The admission webhook, its own process: the chart\'s webhook Deployment (or `webhook.yaml`) runs it.' },
  gate: { help: gateHelp, flags: GATE_FLAGS, intro: 'In `admission.mode=policy`, the lifter of the scheduling gate the policy puts on pods that read their workload: the chart\'s `ownerrefs-gate` Deployment (or `admission-policy.yaml`) runs it.' },
  inject: { help: () => INJECT_HELP, intro: 'The webhook\'s rewrite, offline: for review, and for GitOps pipelines that pre-render manifests.' },
  doctor: { help: () => DOCTOR_HELP, intro: 'An operator\'s checks of one node, each answered OK, or FAIL/WARN with the fix; SKIP for a check the credentials at hand may not make.' },
};

function flagTable(flags: Readonly<Record<string, Flag>>): string {
  return table(['Flag', 'Environment variable', 'Default', 'Meaning'], Object.entries(flags).map(([name, f]) => [
    code(`--${name}`), code(f.env), f.def === '' ? '(empty)' : code(f.def), sentence(f.doc ?? f.help),
  ]));
}

export function commandLinePage(): string {
  // render and inject say "exit 3" in their own words: it must be the code listed here.
  if (EXIT_REFUSED !== EXIT.refused.code || EXIT_DENIED !== EXIT.refused.code) {
    throw new Error(`scripts/reference: render exits ${EXIT_REFUSED} and inject ${EXIT_DENIED} on a refusal, but EXIT.refused is ${EXIT.refused.code}`);
  }
  const commands = describeAll('commands', Object.keys(COMMANDS), DOCS);
  const sections = commands.map(([name, d]) => {
    const parts = [`## ${name}`, d.intro, block(d.help())];
    if (d.flags) parts.push(flagTable(d.flags));
    return parts.join('\n\n');
  });
  return `${header(['agent/config.ts', 'agent/admission/webhook/config.ts', 'agent/cli/render.ts', 'agent/cli/inject.ts', 'agent/cli/doctor.ts'])}
# Command line

\`ownerrefs-agent\` is one program with a command for each role. In the image it is on
\`PATH\`; from a checkout, \`npm run -s agent -- <command>\` runs it with the project's Node.

${block(mainHelp())}

${table(['Command', 'What it does'], Object.entries(COMMANDS).map(([name, what]) => [`[${code(name)}](#${name})`, sentence(what)]))}

Flags win over environment variables, which win over defaults. \`--help\` (or \`-h\`) works
on every command. Every error is one line on standard error, with control characters
escaped; \`--debug\` adds the stack trace.

## Exit codes

${table(['Code', 'Meaning'], Object.values(EXIT).map((e) => [String(e.code), sentence(e.meaning)]))}

${sections.join('\n\n')}
`;
}
