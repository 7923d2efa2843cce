// The release's SLSA provenance (v1): what was built, from which source, by whom. release.sh
// attaches it to the image index as a signed in-toto attestation (`cosign attest --type
// slsaprovenance1`), so that `cosign verify-attestation` answers where the image came from.
//
//   node scripts/provenance.ts --version V --repository R --arch amd64 --arch arm64 \
//     --started ISO8601 [--lock package-lock.json]   > predicate.json
//
// The builder is the hosted workflow when GitHub's environment names one (GITHUB_WORKFLOW_REF,
// GITHUB_RUN_ID), else this machine. The source is the checkout's commit; a checkout with
// changes not committed says so (`dirty`), since the commit alone would not reproduce it.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

/** Where this project's source lives: the provenance names it, the commit pins it. */
export const SOURCE = 'https://github.com/ownerrefs-dev/ownerrefs-agent';
/** What `buildDefinition` means: the steps of scripts/release.sh, given the parameters below. */
export const BUILD_TYPE = `${SOURCE}/blob/main/docs/contributing/releasing.md#provenance`;

/** The facts one release build knows about itself. */
export interface BuildFacts {
  version: string;
  /** The image's repository, the identity its signature names. */
  repository: string;
  architectures: string[];
  commit: string;
  /** Uncommitted changes in the checkout: the commit alone does not reproduce the build. */
  dirty: boolean;
  /** sha256 of package-lock.json: the npm packages the image ships. */
  lockSha256: string;
  /** The Node.js version inside the image. */
  node: string;
  builder: { id: string; invocationId?: string };
  startedOn: string;
  finishedOn: string;
}

/** SLSA provenance v1's predicate (https://slsa.dev/spec/v1.0/provenance) for one build. */
export function provenance(f: BuildFacts) {
  return {
    buildDefinition: {
      buildType: BUILD_TYPE,
      externalParameters: {
        source: { uri: `git+${SOURCE}`, digest: { gitCommit: f.commit } },
        version: f.version,
        repository: f.repository,
        architectures: f.architectures,
      },
      internalParameters: { dirty: f.dirty },
      resolvedDependencies: [
        { uri: `git+${SOURCE}@v${f.version}`, digest: { gitCommit: f.commit } },
        { name: 'package-lock.json', digest: { sha256: f.lockSha256 } },
        { uri: `pkg:generic/node@${f.node.replace(/^v/, '')}`, name: 'node' },
      ],
    },
    runDetails: {
      builder: { id: f.builder.id },
      metadata: { ...f.builder.invocationId ? { invocationId: f.builder.invocationId } : {}, startedOn: f.startedOn, finishedOn: f.finishedOn },
    },
  };
}

/** The builder: GitHub's workflow run when its environment says so, else this machine. */
export function builderOf(env: NodeJS.ProcessEnv, host: string): BuildFacts['builder'] {
  const server = env.GITHUB_SERVER_URL ?? 'https://github.com';
  if (env.GITHUB_WORKFLOW_REF) {
    return {
      id: `${server}/${env.GITHUB_WORKFLOW_REF}`,
      ...env.GITHUB_RUN_ID && env.GITHUB_REPOSITORY ? { invocationId: `${server}/${env.GITHUB_REPOSITORY}/actions/runs/${env.GITHUB_RUN_ID}/attempts/${env.GITHUB_RUN_ATTEMPT ?? '1'}` } : {},
    };
  }
  return { id: `urn:ownerrefs:builder:local:${host}` };
}

if (import.meta.filename === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' }, repository: { type: 'string' }, arch: { type: 'string', multiple: true },
      started: { type: 'string' }, lock: { type: 'string', default: 'package-lock.json' },
    },
  });
  const need = (k: 'version' | 'repository' | 'started') => values[k] ?? (() => { console.error(`provenance: --${k} is required`); process.exit(2); })();
  const git = (...args: string[]) => execFileSync('git', args, { cwd: path.dirname(path.resolve(values.lock!)), encoding: 'utf8' }).trim();
  const facts: BuildFacts = {
    version: need('version'),
    repository: need('repository'),
    architectures: values.arch ?? [],
    commit: git('rev-parse', 'HEAD'),
    dirty: git('status', '--porcelain', '--untracked-files=no') !== '',
    lockSha256: createHash('sha256').update(readFileSync(values.lock!)).digest('hex'),
    node: process.version,
    builder: builderOf(process.env, os.hostname()),
    startedOn: need('started'),
    finishedOn: new Date().toISOString(),
  };
  process.stdout.write(`${JSON.stringify(provenance(facts), null, 2)}\n`);
}
