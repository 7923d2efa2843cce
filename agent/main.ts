#!/usr/bin/env node
// Entry point: parse the command line and wire parts together; nothing else.

import { pino } from 'pino';
import { startAgent } from './agent.ts';
import { ConfigError } from './common/errors.ts';
import { oneLine } from './common/validation.ts';
import { F, serializeErr } from './monitoring/logfields.ts';
import { COMMANDS, EXIT, mainHelp, parseRunConfig, runHelp } from './config.ts';

/**
 * Standard output that cannot be written (a reader that closed the pipe, `| head`; a full
 * disk) is an error event on the stream, which Node turns into an uncaught exception and
 * a stack trace. A closed pipe ends the command quietly, as SIGPIPE ends other tools; any
 * other failure is one line and exit 1.
 */
function guardOutput(): void {
  const onError = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(EXIT.sigpipe.code);
    process.stderr.write(`ownerrefs-agent: cannot write to standard output: ${oneLine(err.message)}\n`);
    process.exit(EXIT.failure.code);
  };
  process.stdout.on('error', onError);
  // Nowhere left to say anything: end with the failure's code.
  process.stderr.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? EXIT.sigpipe.code : EXIT.failure.code));
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv.filter((a) => a !== '--debug'); // --debug: see the error handler below
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(mainHelp());
    return cmd === undefined ? EXIT.usage.code : EXIT.ok.code;
  }
  if (cmd === '--version' || cmd === 'version') {
    process.stdout.write(`ownerrefs-agent ${(await import('./version.ts')).agentVersion()}\n`);
    return EXIT.ok.code;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    if (cmd === 'run') process.stdout.write(runHelp());
    else if (cmd === 'render') process.stdout.write((await import('./cli/render.ts')).RENDER_HELP);
    else if (cmd === 'inject') process.stdout.write((await import('./cli/inject.ts')).INJECT_HELP);
    else if (cmd === 'webhook') process.stdout.write((await import('./admission/webhook/config.ts')).webhookHelp());
    else if (cmd === 'gate') process.stdout.write((await import('./admission/gate/config.ts')).gateHelp());
    else if (cmd === 'doctor') process.stdout.write((await import('./cli/doctor.ts')).DOCTOR_HELP);
    else return unknownCommand(cmd);
    return EXIT.ok.code;
  }
  if (cmd === 'render') {
    // Loaded on demand: `run` on every node should not carry the YAML parser.
    return (await import('./cli/render.ts')).render(rest, process.stdin, process.stdout, process.stderr);
  }
  if (cmd === 'inject') return (await import('./cli/inject.ts')).inject(rest, process.stdin, process.stdout, process.stderr);
  if (cmd === 'webhook') return serveWebhook(rest);
  if (cmd === 'gate') return liftGates(rest);
  if (cmd === 'doctor') return doctor(rest);
  if (cmd !== 'run') return unknownCommand(cmd);

  const cfg = parseRunConfig(rest, process.env);
  const log = pino({ level: cfg.logLevel, base: { [F.node]: cfg.nodeName }, serializers: { err: serializeErr } });
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
  return EXIT.ok.code;
}

/** In the agent's container with no flags: the agent's own (PID 1's); else run's flags as given. */
async function doctor(argv: string[]): Promise<number> {
  const d = await import('./cli/doctor.ts');
  const { readFile } = await import('node:fs/promises');
  const args = argv.length === 0 ? await d.agentArgsOfPid1((p) => readFile(p, 'utf8')) ?? [] : argv;
  const cfg = parseRunConfig(args, process.env);
  const { KubeApiClient } = await import('./kube/client.ts');
  const { KubeCredentials } = await import('./kube/kubeconfig.ts');
  // Credentials that cannot be loaded are one of the findings: the node's own checks still run.
  let api: Pick<InstanceType<typeof KubeApiClient>, 'json' | 'close'>;
  try {
    api = new KubeApiClient(KubeCredentials.load(cfg.kubeconfig));
  } catch (err) {
    api = { json: () => Promise.reject(err), close: () => {} };
  }
  try {
    const findings = await d.runChecks({ nodeName: cfg.nodeName, kubeletRoot: cfg.kubeletRoot, csiSocket: cfg.csiSocket, registrationDir: cfg.registrationDir,
      health: { host: cfg.healthHost, port: cfg.healthPort } }, d.processEnv(api));
    process.stdout.write(d.formatFindings(findings));
    return findings.some((f) => f.verdict === 'FAIL') ? EXIT.failure.code : EXIT.ok.code;
  } finally {
    api.close();
  }
}

/** The webhook is its own process (a Deployment): none of its code loads in `run`. */
async function liftGates(argv: string[]): Promise<number> {
  const { parseGateConfig } = await import('./admission/gate/config.ts');
  const { startGate } = await import('./admission/gate/command.ts');
  const cfg = parseGateConfig(argv, process.env);
  const log = pino({ level: cfg.logLevel, base: { component: 'gate' }, serializers: { err: serializeErr } });
  const gate = await startGate(cfg, log);
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => resolve());
  });
  gate.drain();
  log.info({ seconds: cfg.shutdownDelayMs / 1000 }, 'shutting down: lifting the gates a policy being deleted still adds');
  await new Promise((r) => setTimeout(r, cfg.shutdownDelayMs));
  await gate.stop();
  log.info('stopped');
  return EXIT.ok.code;
}

async function serveWebhook(argv: string[]): Promise<number> {
  const { parseWebhookConfig } = await import('./admission/webhook/config.ts');
  const { startWebhook } = await import('./admission/webhook/command.ts');
  const cfg = parseWebhookConfig(argv, process.env);
  const log = pino({ level: cfg.logLevel, base: { component: 'webhook' }, serializers: { err: serializeErr } });
  const webhook = await startWebhook(cfg, log);
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => resolve());
  });
  webhook.drain();
  log.info({ seconds: cfg.shutdownDelayMs / 1000 }, 'shutting down: answering until the API server stops calling this replica');
  await new Promise((r) => setTimeout(r, cfg.shutdownDelayMs));
  await webhook.stop();
  log.info('stopped');
  return EXIT.ok.code;
}

function unknownCommand(cmd: string): number {
  const names = Object.keys(COMMANDS);
  process.stderr.write(`ownerrefs-agent: unknown command ${oneLine(JSON.stringify(cmd))}; the commands are ${names.slice(0, -1).join(', ')} and ${names.at(-1)} (ownerrefs-agent --help)\n`);
  return EXIT.usage.code;
}

/** Bad flags or values: exit 2, as CLIs do. Everything else the user can meet (bad input, a missing file) is 1. */
function isUsageError(err: unknown): boolean {
  return err instanceof ConfigError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'));
}


const argv = process.argv.slice(2);
guardOutput();
main(argv).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`ownerrefs-agent: ${oneLine(message)}\n`);
    // The stack is for us, not the user: only on request.
    if (argv.includes('--debug') && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
    process.exitCode = isUsageError(err) ? EXIT.usage.code : EXIT.failure.code;
    // A start that failed half-way can leave handles open (the directory watch, timers):
    // exit rather than idle unready with no health endpoint. Unref'd: it never delays a
    // process that would end anyway, and stderr has the time to flush.
    setTimeout(() => process.exit(), 500).unref();
  },
);
