#!/usr/bin/env node
// Entry point: parse the command line and wire parts together; nothing else.

import { pino } from 'pino';
import { startAgent } from './agent.ts';
import { ConfigError } from './common/errors.ts';
import { parseRunConfig, runHelp } from './config.ts';

const HELP = `Usage: ownerrefs-agent <command> [flags]

Commands:
  run      watch this node's pods and project their ownerReferences into their volumes
  render   print (or write) the files the agent would write for one Pod manifest
  webhook  serve the admission webhook that makes KEP-4753's fieldRef metadata.ownerReferences valid
  inject   print what the webhook would make of a manifest (offline)

Run "ownerrefs-agent <command> --help" for a command's flags. --debug adds the stack
trace to an error message. Exit codes: 0 done, 1 bad input or a failure, 2 bad usage,
3 (render) the agent would refuse the pod, (inject) the webhook would deny an object.
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv.filter((a) => a !== '--debug'); // --debug: see the error handler below
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(HELP);
    return cmd === undefined ? 2 : 0;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    if (cmd === 'run') process.stdout.write(runHelp());
    else if (cmd === 'render') process.stdout.write((await import('./cli/render.ts')).RENDER_HELP);
    else if (cmd === 'inject') process.stdout.write((await import('./cli/inject.ts')).INJECT_HELP);
    else if (cmd === 'webhook') process.stdout.write((await import('./webhook/config.ts')).webhookHelp());
    else return unknownCommand(cmd);
    return 0;
  }
  if (cmd === 'render') {
    // Loaded on demand: `run` on every node should not carry the YAML parser.
    return (await import('./cli/render.ts')).render(rest, process.stdin, process.stdout, process.stderr);
  }
  if (cmd === 'inject') return (await import('./cli/inject.ts')).inject(rest, process.stdin, process.stdout, process.stderr);
  if (cmd === 'webhook') return serveWebhook(rest);
  if (cmd !== 'run') return unknownCommand(cmd);

  const cfg = parseRunConfig(rest, process.env);
  const log = pino({ level: cfg.logLevel, base: { node: cfg.nodeName } });
  const agent = await startAgent(cfg, log);
  await new Promise<void>((resolve) => {
    const onSignal = (sig: string) => {
      log.info({ signal: sig }, 'stopping: finishing in-flight writes');
      resolve();
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
  await agent.stop();
  log.info('stopped');
  return 0;
}

/** The webhook is its own process (a Deployment): none of its code loads in `run`. */
async function serveWebhook(argv: string[]): Promise<number> {
  const { parseWebhookConfig } = await import('./webhook/config.ts');
  const { startWebhook } = await import('./webhook/command.ts');
  const cfg = parseWebhookConfig(argv, process.env);
  const log = pino({ level: cfg.logLevel, base: { component: 'webhook' } });
  const webhook = await startWebhook(cfg, log);
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => resolve());
  });
  await webhook.stop();
  log.info('stopped');
  return 0;
}

function unknownCommand(cmd: string): number {
  process.stderr.write(`unknown command ${JSON.stringify(cmd)}\n\n${HELP}`);
  return 2;
}

/** Bad flags or values: exit 2, as CLIs do. Everything else the user can meet (bad input, a missing file) is 1. */
function isUsageError(err: unknown): boolean {
  return err instanceof ConfigError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'));
}

/** One line, whatever the message holds: controls (from the user's input) escaped, never raw on a terminal. */
function oneLine(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]/g, (c) => (c === '\n' ? ' ' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

const argv = process.argv.slice(2);
main(argv).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`ownerrefs-agent: ${oneLine(message)}\n`);
    // The stack is for us, not the user: only on request.
    if (argv.includes('--debug') && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
    process.exitCode = isUsageError(err) ? 2 : 1;
  },
);
