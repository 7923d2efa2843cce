// A release installed as a user installs it: from the files of dist/release-VERSION alone
// (copied elsewhere first; nothing else from the checkout but the KEP's example): the image
// archive imported into the real node's containerd under the chart's default name, the
// packaged chart installed with helm (webhook included), the kubectl plugin installed by krew
// from its manifest and archive; then the KEP's volume example follows its owners.
//
// The suite builds the smoke release (scripts/release.sh --smoke: the amd64 image, the chart,
// the plugin and SHA256SUMS, within CI's time). OWNERREFS_RELEASE=full (npm run test:release)
// builds the whole release and also checks what only it has: the image index's platforms, its
// signature and the files' (cosign, with the release's cosign.pub), the SBOMs, and the arm64
// image's node running `ownerrefs-agent --version` and `doctor --help` under qemu.

import { execFile, spawnSync, type ExecFileOptions } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PolicyV1Api, type V1Pod } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlaneBinaries } from '../../localcluster/controlplane/controlplane.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { freePort } from '../../localcluster/webhookproc.ts';
import { helmBin } from '../../scripts/gen-manifests.ts';
import { ROOT, shellBlocks } from '../support/docblocks.ts';
import { helm, helmOnPath, readyAgent, type Rendering } from '../support/installed.ts';
import { CONTAINERS, IMAGES, useRealNode } from '../support/realnode-e2e.ts';
import { tmpDir } from '../support/tmpdir.ts';

const exec = promisify(execFile);
const FULL = process.env.OWNERREFS_RELEASE === 'full';
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** The chart's default image: what the node is given, so that the install sets no image. */
const IMAGE = `ghcr.io/ownerrefs-dev/ownerrefs-agent:${VERSION}`;
const run = async (cmd: string, args: string[], opts: ExecFileOptions = {}) => {
  try {
    return (await exec(cmd, args, { maxBuffer: 1 << 26, encoding: 'utf8', ...opts })).stdout as string;
  } catch (err) {
    throw new Error(`${cmd} ${args.join(' ')}: ${(err as { stderr?: string }).stderr?.trim() || String(err)}`, { cause: err });
  }
};
const tool = async (name: string) => path.join((await run('bash', [path.join(ROOT, 'localcluster', 'release', 'tools', 'build.sh'), name])).trim(), name);

const IMAGE_TOOLS = ['podman', 'debootstrap'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
if (CONTAINERS && IMAGE_TOOLS.length > 0) console.warn(`NO RELEASE TEST: this machine lacks ${IMAGE_TOOLS.join(', ')}; SKIPPED (CI installs them)`);

describe.runIf(CONTAINERS && IMAGE_TOOLS.length === 0)(`a ${FULL ? 'full' : 'smoke'} release, installed from its files alone on a real node`, () => {
  const e = useRealNode('release', { objects: false });
  /** The release's files, as downloaded: a directory of their own. */
  let rel: string;
  const file = (name: string) => path.join(rel, name);

  beforeAll(async () => {
    await run('bash', [path.join(ROOT, 'scripts', 'release.sh'), ...FULL ? [] : ['--smoke']], { cwd: ROOT });
    // Kept for every test of the file (tmpDir's go after each).
    rel = path.join(mkdtempSync(path.join(os.tmpdir(), 'release-')), 'download');
    cpSync(path.join(ROOT, 'dist', `release-${VERSION}${FULL ? '' : '-smoke'}`), rel, { recursive: true });
  }, 1_800_000);
  afterAll(() => rmSync(path.dirname(rel), { recursive: true, force: true }));

  it('every file is the one SHA256SUMS names, and the chart, plugin and image say the release\'s version', async () => {
    await run('sha256sum', ['--quiet', '-c', 'SHA256SUMS'], { cwd: rel });
    const listed = readFileSync(file('SHA256SUMS'), 'utf8').trim().split('\n').map((l) => l.split(/\s+/)[1]).sort();
    expect(listed).toEqual(readdirSync(rel).filter((f) => f !== 'SHA256SUMS' && f !== 'SHA256SUMS.sigstore.json').sort());
    const chart = parse(await run(helmBin(), ['show', 'chart', file(`ownerrefs-agent-${VERSION}.tgz`)])) as { version: string; appVersion: string };
    expect(chart).toMatchObject({ version: VERSION, appVersion: VERSION });
    expect((parse(await run(helmBin(), ['show', 'values', file(`ownerrefs-agent-${VERSION}.tgz`)])) as { image: { tag: string } }).image.tag).toBe(VERSION);
    const krew = parse(readFileSync(file('ownerrefs.krew.yaml'), 'utf8')) as { spec: { version: string; platforms: { sha256: string; uri: string }[] } };
    expect(krew.spec.version).toBe(`v${VERSION}`);
    const sha = (await run('sha256sum', [file('kubectl-ownerrefs.tar.gz')])).split(' ')[0];
    expect(krew.spec.platforms.map((p) => [p.sha256, p.uri.endsWith(`/v${VERSION}/kubectl-ownerrefs.tar.gz`)])).toEqual([[sha, true]]);
  });

  it.runIf(FULL)('the image index holds linux/amd64 and linux/arm64, signed; the chart and the sums are signed; publish\'s dry run delivers them; the SBOMs list the image\'s packages and the npm dependencies', { timeout: 600_000 }, async () => {
    const [cosign, crane] = [await tool('cosign'), await tool('crane')];
    const { repo, stop } = await loadIntoRegistry(crane, cosign);
    try {
      const index = JSON.parse(await run(crane, ['manifest', '--insecure', `${repo}:${VERSION}`])) as { manifests: { platform: { os: string; architecture: string } }[] };
      expect(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`).sort()).toEqual(['linux/amd64', 'linux/arm64']);
      expect((await run(crane, ['digest', '--insecure', `${repo}:${VERSION}`])).trim()).toBe(readFileSync(file(`ownerrefs-agent-image-${VERSION}.digest`), 'utf8').trim());
      await run(cosign, ['verify', '--key', file('cosign.pub'), '--insecure-ignore-tlog', '--allow-insecure-registry', `${repo}:${VERSION}`]);
      // The arm64 image: its own node, under qemu, runs the agent's commands (no shell in it).
      await run('bash', [path.join(ROOT, 'localcluster', 'image', 'binfmt-arm64.sh')]);
      const arm = path.join(rel, '..', 'arm64.tar');
      await run(crane, ['pull', '--insecure', '--platform', 'linux/arm64', `${repo}:${VERSION}`, arm]);
      const loaded = (await run('podman', ['load', '-q', '-i', arm])).trim().replace(/^Loaded image: /, '');
      const inArm = (entrypoint: string, ...args: string[]) => run('podman', ['--runtime', 'runc', 'run', '--rm', '--platform', 'linux/arm64', '--entrypoint', entrypoint, loaded, ...args]);
      expect(await inArm('node', '-p', 'process.arch')).toBe('arm64\n');
      expect(await inArm('ownerrefs-agent', '--version')).toBe(`ownerrefs-agent ${VERSION}\n`);
      expect(await inArm('ownerrefs-agent', 'doctor', '--help')).toMatch(/^Usage: ownerrefs-agent doctor/);
    } finally {
      await stop();
    }
    // The workflow's publishing step, against a registry on loopback: it checks what arrived.
    await run('bash', [path.join(ROOT, 'scripts', 'publish.sh'), '--dry-run'], { cwd: ROOT });
    for (const f of [`ownerrefs-agent-${VERSION}.tgz`, 'SHA256SUMS']) {
      await run(cosign, ['verify-blob', '--key', file('cosign.pub'), '--insecure-ignore-tlog', '--bundle', file(`${f}.sigstore.json`), file(f)]);
    }
    const names = (f: string) => ((JSON.parse(readFileSync(file(f), 'utf8')) as { bomFormat: string; components: { name: string }[] }).components ?? []).map((c) => c.name);
    for (const arch of ['amd64', 'arm64']) {
      const image = names(`ownerrefs-agent-image-${VERSION}-linux-${arch}.cdx.json`);
      expect(image, arch).toEqual(expect.arrayContaining(['libc6', 'pino', 'prom-client', 'chokidar']));
    }
    // The npm dependencies the image ships: production ones, none of the build's.
    const npm = names(`ownerrefs-agent-${VERSION}-npm.cdx.json`);
    expect(npm).toEqual(expect.arrayContaining(['pino', 'prom-client', 'chokidar', 'yaml']));
    expect(npm).not.toContain('vitest');
  });

  it('installs from the files: the image into the node, the chart with helm and its production preset (three webhook replicas, the PodDisruptionBudget), the plugin with krew; the KEP\'s example follows its owners', { timeout: 900_000 }, async () => {
    // The image, under the chart's default name.
    if (FULL) {
      const [cosign, crane] = [await tool('cosign'), await tool('crane')];
      const { repo, stop } = await loadIntoRegistry(crane, cosign);
      try {
        const amd = path.join(rel, '..', 'amd64.tar');
        await run(crane, ['pull', '--insecure', '--platform', 'linux/amd64', `${repo}:${VERSION}`, amd]);
        await e.node.importImage!(amd);
        await e.node.tagImage!(`${repo}:${VERSION}`, IMAGE);
      } finally {
        await stop();
      }
    } else {
      await e.node.importImage!(file(`ownerrefs-agent-image-${VERSION}-linux-amd64.oci.tar`));
      await e.node.tagImage!(`localhost/ownerrefs/ownerrefs-agent:${VERSION}`, IMAGE);
    }
    // The chart, from its package; the image named by its defaults.
    const r: Rendering = { helm: helmBin(), chart: file(`ownerrefs-agent-${VERSION}.tgz`), image: { repository: IMAGE.split(':')[0]!, tag: VERSION }, port: await freePort() };
    // With the production preset the package carries: three webhook replicas spread over
    // zones, then nodes (this node is in one zone), and the PodDisruptionBudget.
    await run('tar', ['-xzf', r.chart, '-C', rel, 'ownerrefs-agent/values-production.yaml']);
    await e.core.patchNode({ name: e.node.name, body: { metadata: { labels: { 'ownerrefs.dev/agent': 'true', 'topology.kubernetes.io/zone': 'zone-a' } } } }, mergePatch);
    await helm(e, r, ['install', 'ownerrefs-agent', r.chart, '-f', path.join(rel, 'ownerrefs-agent', 'values-production.yaml'), '--set', 'followOwners.rbac=true']);
    const agent = await readyAgent(e);
    expect(agent.spec!.containers[0]!.image).toBe(IMAGE);
    await e.waitFor(async () => (await e.apps.readNamespacedDeployment({ name: 'ownerrefs-webhook', namespace: 'ownerrefs-system' })).status?.readyReplicas === 3 || undefined,
      'the three webhook replicas Ready', 240_000);
    expect(await e.waitFor(async () => (await e.kc.makeApiClient(PolicyV1Api).readNamespacedPodDisruptionBudget({ name: 'ownerrefs-webhook', namespace: 'ownerrefs-system' })).status?.disruptionsAllowed || undefined,
      'the PodDisruptionBudget allows a disruption of the three', 60_000)).toBeGreaterThan(0);

    // The plugin, by krew, from the manifest and the archive.
    const krewRoot = tmpDir('krew-');
    const bin = await controlPlaneBinaries();
    const env = { ...process.env, KREW_ROOT: krewRoot, KUBECONFIG: e.cp.kubeconfigPath, PATH: `${path.join(krewRoot, 'bin')}:${bin}:${process.env.PATH}` };
    await run(await tool('krew'), ['install', `--manifest=${file('ownerrefs.krew.yaml')}`, `--archive=${file('kubectl-ownerrefs.tar.gz')}`], { env });
    const status = await e.waitFor(async () => {
      const out = await run('kubectl', ['ownerrefs', 'status'], { env });
      return new RegExp(`^  ${e.node.name} +Running +true +\\S+ +${VERSION.replaceAll('.', '\\.')}$`, 'm').test(out) && /^  (\d+) of \1 replicas ready/m.test(out) ? out : undefined;
    }, 'kubectl ownerrefs status: the agent on the node and the webhook ready', 120_000);
    expect(status).toMatch(/^  ownerrefs-agent\.ownerrefs\.dev: bound/m);

    await kepExampleFollowsOwners('kep-owner');
  });

  it.runIf(FULL)('in a mirror under another name: cosign verifies the signature and the attestations (the provenance names this commit, the SBOMs each architecture); a containers-policy.json with matchRepository accepts the ghcr name pulled through the mirror, refuses the mirror\'s own name, and accepts it remapped', { timeout: 300_000 }, async () => {
    const [cosign, crane, skopeo] = [await tool('cosign'), await tool('crane'), await tool('skopeo')];
    const { repo, stop } = await loadIntoRegistry(crane, cosign);
    try {
      const keyFlags = ['--key', file('cosign.pub'), '--insecure-ignore-tlog', '--allow-insecure-registry'];
      await run(cosign, ['verify', ...keyFlags, `${repo}:${VERSION}`]);
      const predicates = async (type: string) => (await run(cosign, ['verify-attestation', ...keyFlags, '--type', type, `${repo}:${VERSION}`])).trim().split('\n')
        .map((l) => (JSON.parse(Buffer.from((JSON.parse(l) as { payload: string }).payload, 'base64').toString()) as { predicate: Record<string, any> }).predicate); // eslint-disable-line @typescript-eslint/no-explicit-any
      const [prov] = await predicates('slsaprovenance1');
      expect(prov!.buildDefinition.externalParameters).toMatchObject({ version: VERSION, repository: IMAGE.split(':')[0], source: { digest: { gitCommit: (await run('git', ['rev-parse', 'HEAD'], { cwd: ROOT })).trim() } } });
      const sboms = await predicates('cyclonedx');
      expect(sboms.map((b) => b.metadata.component.version).sort()).toEqual([`${VERSION}-linux-amd64`, `${VERSION}-linux-arm64`]);

      // A containers-policy.json (podman's and skopeo's): the release's key, the identity checked.
      const dir = tmpDir('policy-');
      const registry = repo.split('/')[0]!;
      writeFileSync(path.join(dir, 'registries.conf'), `[[registry]]\nprefix = "ghcr.io/ownerrefs-dev"\nlocation = "ghcr.io/ownerrefs-dev"\n[[registry.mirror]]\nlocation = "${registry}/mirror/ownerrefs-dev"\ninsecure = true\n`);
      mkdirSync(path.join(dir, 'registries.d'));
      writeFileSync(path.join(dir, 'registries.d', 'sigstore.yaml'), `docker:\n  ghcr.io/ownerrefs-dev:\n    use-sigstore-attachments: true\n  ${registry}:\n    use-sigstore-attachments: true\n`);
      const pull = async (scope: string, signedIdentity: object, image: string) => {
        writeFileSync(path.join(dir, 'policy.json'), JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: { [scope]: [{ type: 'sigstoreSigned', keyPath: file('cosign.pub'), signedIdentity }] } } }));
        const r = spawnSync(skopeo, ['--policy', path.join(dir, 'policy.json'), '--registries-conf', path.join(dir, 'registries.conf'), '--registries.d', path.join(dir, 'registries.d'),
          'copy', '--src-tls-verify=false', `docker://${image}`, `dir:${tmpDir('pulled-')}`], { encoding: 'utf8' });
        return r.status === 0 ? 'accepted' : r.stderr.match(/Source image rejected: [^"\n]*(?:"[^"]*"[^"\n]*)?/)?.[0] ?? r.stderr.trim();
      };
      const ghcr = IMAGE.split(':')[0]!;
      expect(await pull(ghcr, { type: 'matchRepository' }, IMAGE)).toBe('accepted');
      expect(await pull(ghcr, { type: 'matchRepoDigestOrExact' }, IMAGE)).toBe('accepted');
      expect(await pull(repo, { type: 'matchRepository' }, `${repo}:${VERSION}`)).toMatch(`Signature for identity \\"${IMAGE}\\" is not accepted`);
      expect(await pull(repo, { type: 'remapIdentity', prefix: `${registry}/mirror`, signedPrefix: 'ghcr.io' }, `${repo}:${VERSION}`)).toBe('accepted');
    } finally {
      await stop();
    }
  });

  it.runIf(FULL)('signs keyless with the hosted workflow\'s flags as far as this machine allows: cosign takes them, asks the ambient OIDC provider (GitHub\'s, here on loopback) for a token, and goes on to Fulcio', { timeout: 120_000 }, async () => {
    const [cosign, crane] = [await tool('cosign'), await tool('crane')];
    const { repo, stop } = await loadIntoRegistry(crane, cosign);
    const requests: string[] = [];
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const jwt = `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64({ iss: 'https://token.actions.githubusercontent.com', sub: `repo:ownerrefs-dev/ownerrefs-agent:ref:refs/tags/v${VERSION}`, aud: 'sigstore', iat: now, exp: now + 600 })}.c2ln`;
    const oidc = createServer((req, res) => { requests.push(`${req.url} ${req.headers.authorization}`); res.end(JSON.stringify({ value: jwt })); });
    await new Promise<void>((resolve) => oidc.listen(0, '127.0.0.1', resolve));
    try {
      const digest = readFileSync(file(`ownerrefs-agent-image-${VERSION}.digest`), 'utf8').trim();
      const env = { ...process.env, PATH: `${path.dirname(cosign)}:${process.env.PATH}`, OWNERREFS_SIGN: 'keyless',
        ACTIONS_ID_TOKEN_REQUEST_URL: `http://127.0.0.1:${(oidc.address() as { port: number }).port}/token`, ACTIONS_ID_TOKEN_REQUEST_TOKEN: 'request-token' };
      for (const args of [['image', `${repo}@${digest}`, IMAGE], ['attest', 'slsaprovenance1', file(`ownerrefs-agent-${VERSION}.provenance.json`), `${repo}@${digest}`], ['blob', file('SHA256SUMS'), path.join(tmpDir('bundle-'), 'b.json')]]) {
        requests.length = 0;
        // Asynchronous: the token endpoint answers from this process.
        const r = await exec('bash', [path.join(ROOT, 'scripts', 'sign.sh'), ...args], { env, encoding: 'utf8', timeout: 60_000 })
          .then(() => ({ status: 0, stderr: '' }), (err: { code?: number; stderr?: string }) => ({ status: err.code, stderr: err.stderr ?? '' }));
        expect(r.status, args[0]).not.toBe(0);
        expect(requests, args[0]).toEqual(['/token&audience=sigstore bearer request-token']);
        expect(r.stderr, args[0]).toMatch(/fulcio\.sigstore\.dev/);
      }
    } finally {
      oidc.close();
      await stop();
    }
  });

  /** The KEP's volume example, its image the node's busybox (named apart by `owner`): its file names an owner set after it started. */
  async function kepExampleFollowsOwners(owner: string): Promise<void> {
    const example = parse(readFileSync(path.join(ROOT, 'examples', 'kep', 'volume-pod.yaml'), 'utf8')) as V1Pod;
    example.metadata!.name = `${example.metadata!.name}-${owner}`;
    example.spec!.containers[0]!.image = IMAGES.busybox;
    example.spec!.containers[0]!.imagePullPolicy = 'IfNotPresent';
    await e.core.createNamespacedPod({ namespace: e.ns, body: example });
    const pod = await e.waitFor(async () => { const p = await e.core.readNamespacedPod({ name: example.metadata!.name!, namespace: e.ns }); return p.status?.phase === 'Running' ? p : undefined; }, 'the example Running', 120_000);
    const cm = await e.core.createNamespacedConfigMap({ namespace: e.ns, body: { metadata: { name: owner } } });
    await e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner, uid: cm.metadata!.uid! }] } } }, mergePatch);
    await e.waitFor(async () => (await e.exec(pod, ['cat', '/etc/podinfo/ownerReferences']).catch(() => '')).includes(`"uid":"${cm.metadata!.uid}"`) || undefined,
      'the file, read in the container, names the ConfigMap', 120_000);
  }

  it.runIf(FULL)('air-gapped, INSTALL\'s steps as written: the files checked, the image and its signatures loaded into a mirror, the chart and the plugin installed from their files; the node pulls the agent from the mirror and the KEP\'s example follows its owners', { timeout: 900_000 }, async () => {
    const [cosign, crane, krew] = [await tool('cosign'), await tool('crane'), await tool('krew')];
    const r: Rendering = { helm: helmBin(), chart: file(`ownerrefs-agent-${VERSION}.tgz`), image: { repository: IMAGE.split(':')[0]!, tag: VERSION }, port: await freePort() };
    await helm(e, r, ['uninstall', 'ownerrefs-agent', '--wait']).catch(() => '');
    const port = await freePort();
    const registry = execFile(crane, ['registry', 'serve', '--address', `127.0.0.1:${port}`]);
    const bin = tmpDir('air-bin-');
    const cleanHelm = helmOnPath(e, r, bin);
    try {
      await e.waitFor(() => run(crane, ['catalog', '--insecure', `127.0.0.1:${port}`]).then(() => true, () => undefined), 'the mirror', 10_000);
      // The block as INSTALL shows it; only the mirror's address is this machine's.
      const block = shellBlocks('docs/INSTALL.md').find((b) => b.body.includes('cosign load --dir image'))!;
      const MIRROR = 'MIRROR=registry.example.internal/ownerrefs';
      expect(block.body.split('\n')[0]).toContain(MIRROR);
      const script = block.body.replace(MIRROR, `MIRROR=127.0.0.1:${port}/ownerrefs`);
      // The files alone, in a directory of their own; the tools on PATH as a user has them.
      const air = tmpDir('air-');
      cpSync(rel, air, { recursive: true });
      symlinkSync(cosign, path.join(bin, 'cosign'));
      symlinkSync(krew, path.join(bin, 'kubectl-krew'));
      const krewRoot = tmpDir('krew-');
      const env = { ...process.env, KREW_ROOT: krewRoot, KUBECONFIG: e.cp.kubeconfigPath, PATH: `${bin}:${path.join(krewRoot, 'bin')}:${await controlPlaneBinaries()}:${process.env.PATH}` };
      await run('bash', ['-euo', 'pipefail', '-c', script], { cwd: air, env });
      const agent = await readyAgent(e);
      expect(agent.spec!.containers[0]!.image).toBe(`127.0.0.1:${port}/ownerrefs/ownerrefs-agent:${VERSION}`);
      expect(agent.spec!.containers[0]!.imagePullPolicy).not.toBe('Never');
      // Pulled from the mirror: the signatures of each platform's image are there too.
      const tags = (await run(crane, ['ls', '--insecure', `127.0.0.1:${port}/ownerrefs/ownerrefs-agent`])).trim().split('\n');
      expect(tags.filter((t) => t.endsWith('.sig'))).toHaveLength(3);
      await kepExampleFollowsOwners('air-owner');
    } finally {
      cleanHelm();
      registry.kill();
    }
  });

  /** A registry on loopback (as a user's own), the release's image layout loaded into it with its signature (`cosign load`). */
  async function loadIntoRegistry(crane: string, cosign: string): Promise<{ repo: string; stop: () => Promise<void> }> {
    const port = await freePort();
    const child = execFile(crane, ['registry', 'serve', '--address', `127.0.0.1:${port}`]);
    const registry = `127.0.0.1:${port}`;
    await e.waitFor(() => run(crane, ['catalog', '--insecure', registry]).then(() => true, () => undefined), 'the loopback registry', 10_000);
    const layout = path.join(tmpDir('layout-'), 'oci');
    mkdirSync(layout);
    await run('tar', ['-xf', file(`ownerrefs-agent-image-${VERSION}.oci.tar`), '-C', layout]);
    // Under another name than the one signed, as a mirror holds it.
    const repo = `${registry}/mirror/ownerrefs-dev/ownerrefs-agent`;
    await run(cosign, ['load', '--allow-insecure-registry', '--dir', layout, `${repo}:${VERSION}`]);
    // Each platform image with its own signature, as INSTALL's air-gapped steps load them.
    for (const p of readdirSync(path.join(layout, 'platforms'))) await run(cosign, ['load', '--allow-insecure-registry', '--dir', path.join(layout, 'platforms', p), `${repo}:${VERSION}-${p}`]);
    return { repo, stop: async () => { child.kill(); } };
  }
});
