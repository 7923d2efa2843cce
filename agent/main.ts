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

Run "ownerrefs-agent <command> --help" for a command's flags.
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(HELP);
    return cmd === undefined ? 2 : 0;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    if (cmd === 'run') process.stdout.write(runHelp());
    else if (cmd === 'render') process.stdout.write((await import('./cli/render.ts')).RENDER_HELP);
    else return unknownCommand(cmd);
    return 0;
  }
  if (cmd === 'render') {
    // Loaded on demand: `run` on every node should not carry the YAML parser.
    await (await import('./cli/render.ts')).render(rest, process.stdin, process.stdout);
    return 0;
  }
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

function unknownCommand(cmd: string): number {
  process.stderr.write(`unknown command ${JSON.stringify(cmd)}\n\n${HELP}`);
  return 2;
}

/** Bad flags or values: say so briefly and exit 2, as CLIs do; anything else is a bug or an I/O error. */
function isUsageError(err: unknown): boolean {
  return err instanceof ConfigError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'));
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    const usage = isUsageError(err);
    // System errors (ENOENT on a FILE argument, say) speak for themselves; others are bugs: show where.
    const brief = usage || (err instanceof Error && 'code' in err);
    process.stderr.write(`ownerrefs-agent: ${err instanceof Error ? (brief ? err.message : err.stack) : String(err)}\n`);
    process.exitCode = usage ? 2 : 1;
  },
);
