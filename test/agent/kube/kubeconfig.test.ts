// The agent's own kubeconfig / in-cluster loader (agent/kube/kubeconfig.ts): what each
// supported field turns into, what is refused and why, token-file rotation, and a real
// TLS round trip through KubeApiClient. Also checks that the agent's module graph never
// loads @kubernetes/client-node at run time (the reason the loader exists).

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { KubeApiClient } from '../../../agent/kube/client.ts';
import { KubeconfigError, KubeCredentials, TOKEN_REREAD_MS } from '../../../agent/kube/kubeconfig.ts';
import { ConfigError } from '../../../agent/common/errors.ts';
import { generatePki } from '../../../localcluster/controlplane/certs.ts';
import { tmpDir } from '../../support/tmpdir.ts';

const ROOT = path.join(import.meta.dirname, '..', '..', '..');
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A one-context kubeconfig with the given cluster and user fields. */
function kubeconfig(cluster: object, user: object = {}): string {
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'ctx',
    clusters: [{ name: 'c', cluster: { server: 'https://10.0.0.1:6443', ...cluster } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
  });
}

async function applied(creds: KubeCredentials): Promise<https.RequestOptions> {
  const opts: https.RequestOptions = {};
  await creds.applyToHTTPSOptions(opts);
  return opts;
}

describe('KubeCredentials.fromString: supported fields', () => {
  it.each<{ what: string; cluster?: object; user?: object; files?: Record<string, string>; want: (o: https.RequestOptions, dir: string) => void }>([
    {
      what: 'inline CA and token',
      cluster: { 'certificate-authority-data': b64('CA') }, user: { token: 'tok' },
      want: (o) => {
        expect(o.ca?.toString()).toBe('CA');
        expect(o.headers).toEqual({ Authorization: 'Bearer tok' });
        expect(o.rejectUnauthorized).toBeUndefined();
      },
    },
    {
      what: 'CA, client certificate and key as files relative to the kubeconfig',
      cluster: { 'certificate-authority': 'pki/ca.crt' }, user: { 'client-certificate': 'pki/c.crt', 'client-key': '/ABS/c.key' },
      files: { 'pki/ca.crt': 'CAFILE', 'pki/c.crt': 'CERT', 'c.key': 'KEY' },
      want: (o) => {
        expect([o.ca?.toString(), o.cert?.toString(), o.key?.toString()]).toEqual(['CAFILE', 'CERT', 'KEY']);
        expect(o.headers).toBeUndefined();
      },
    },
    {
      what: 'inline client certificate and key',
      user: { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') },
      want: (o) => expect([o.cert?.toString(), o.key?.toString()]).toEqual(['CERT', 'KEY']),
    },
    {
      what: 'tokenFile, trimmed',
      user: { tokenFile: 'tok' }, files: { tok: 'from-file\n' },
      want: (o) => expect(o.headers).toEqual({ Authorization: 'Bearer from-file' }),
    },
    {
      what: 'insecure-skip-tls-verify and tls-server-name',
      cluster: { 'insecure-skip-tls-verify': true, 'tls-server-name': 'api.internal' },
      want: (o) => expect([o.rejectUnauthorized, o.servername, o.ca]).toEqual([false, 'api.internal', undefined]),
    },
    {
      what: 'no user at all',
      want: (o) => expect(o).toEqual({}),
    },
  ])('$what', async ({ cluster = {}, user = {}, files = {}, want }) => {
    const dir = tmpDir();
    for (const [name, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      writeFileSync(path.join(dir, name), text);
    }
    const fix = (o: object) => JSON.parse(JSON.stringify(o).replaceAll('/ABS', dir)) as object;
    want(await applied(KubeCredentials.fromString(kubeconfig(fix(cluster), fix(user)), dir)), dir);
  });

  it('reads YAML, picks the current context among several, and keeps the server path', () => {
    const yaml = `
apiVersion: v1
kind: Config
current-context: b
clusters:
- {name: one, cluster: {server: "https://one:443"}}
- name: two
  cluster:
    server: https://two:6443/prefix
contexts:
- {name: a, context: {cluster: one, user: x}}
- {name: b, context: {cluster: two, user: x}}
users:
- {name: x, user: {token: t}}
`;
    expect(KubeCredentials.fromString(yaml, '/').getCurrentCluster())
      .toEqual({ name: 'two', server: 'https://two:6443/prefix', skipTLSVerify: false });
  });

  it('loads from a file, resolving relative paths against its directory', async () => {
    const dir = tmpDir();
    writeFileSync(path.join(dir, 'ca.crt'), 'CA');
    writeFileSync(path.join(dir, 'config'), kubeconfig({ 'certificate-authority': 'ca.crt' }, { token: 't' }));
    expect((await applied(KubeCredentials.fromFile(path.join(dir, 'config')))).ca?.toString()).toBe('CA');
  });

  it('re-reads a CA file on each call, so a rotated CA is used', async () => {
    const dir = tmpDir();
    writeFileSync(path.join(dir, 'ca.crt'), 'OLD');
    const creds = KubeCredentials.fromString(kubeconfig({ 'certificate-authority': 'ca.crt' }), dir);
    expect((await applied(creds)).ca?.toString()).toBe('OLD');
    writeFileSync(path.join(dir, 'ca.crt'), 'NEW');
    expect((await applied(creds)).ca?.toString()).toBe('NEW');
  });
});

describe('KubeCredentials: refused configurations say what to do', () => {
  it.each<{ what: string; text?: string; cluster?: object; user?: object; error: RegExp }>([
    { what: 'exec plugin', user: { exec: { command: 'aws' } }, error: /user field exec: exec credential plugins are not supported/ },
    { what: 'auth-provider', user: { 'auth-provider': { name: 'oidc' } }, error: /auth-provider plugins are not supported/ },
    { what: 'basic auth', user: { username: 'a', password: 'b' }, error: /basic authentication is not supported/ },
    { what: 'impersonation', user: { as: 'someone' }, error: /impersonation is not supported/ },
    { what: 'proxy-url', cluster: { 'proxy-url': 'http://proxy:3128' }, error: /proxy-url is not supported/ },
    { what: 'plain http', cluster: { server: 'http://10.0.0.1:8080' }, error: /server must be https:\/\// },
    { what: 'no server', cluster: { server: '' }, error: /cluster "c" has no server/ },
    { what: 'server not a URL', cluster: { server: 'not a url' }, error: /is not a URL/ },
    { what: 'CA as file and data', cluster: { 'certificate-authority': 'x', 'certificate-authority-data': b64('y') }, error: /both certificate-authority and certificate-authority-data/ },
    { what: 'token and tokenFile', user: { token: 'a', tokenFile: 'b' }, error: /both token and tokenFile/ },
    { what: 'certificate without key', user: { 'client-certificate-data': b64('c') }, error: /needs both the certificate and the key/ },
    { what: 'skip verify with a CA', cluster: { 'insecure-skip-tls-verify': true, 'certificate-authority-data': b64('c') }, error: /contradictory/ },
    { what: 'a non-string field', user: { token: 42 }, error: /token must be a string/ },
    { what: 'no current-context', text: '{"clusters":[]}', error: /current-context is not set/ },
    { what: 'context not found', text: '{"current-context":"x","contexts":[]}', error: /contexts has no entry named "x"/ },
    { what: 'cluster not found', text: '{"current-context":"x","contexts":[{"name":"x","context":{"cluster":"gone"}}]}', error: /clusters has no entry named "gone"/ },
    { what: 'not a mapping', text: '- a\n- b\n', error: /expected a mapping/ },
    { what: 'invalid YAML', text: 'a: [\n', error: /not valid YAML or JSON/ },
  ])('$what', ({ text, cluster = {}, user = {}, error }) => {
    const load = () => KubeCredentials.fromString(text ?? kubeconfig(cluster, user), '/');
    expect(load).toThrow(error);
    // A ConfigError: main.ts prints the message alone and exits 2, like a bad flag.
    expect(load).toThrow(ConfigError);
  });

  it('names the file when it cannot be read, and a missing token file fails at load', () => {
    const dir = tmpDir();
    expect(() => KubeCredentials.fromFile(path.join(dir, 'nope'))).toThrow(/cannot read kubeconfig .*nope: ENOENT/);
    expect(() => KubeCredentials.fromString(kubeconfig({}, { tokenFile: 'missing' }), dir)).toThrow(/cannot read token file .*missing: ENOENT/);
  });

  it('names an unreadable CA file at request time', async () => {
    const creds = KubeCredentials.fromString(kubeconfig({ 'certificate-authority': 'gone.crt' }), tmpDir());
    await expect(applied(creds)).rejects.toThrow(/cannot read certificate authority .*gone.crt: ENOENT/);
  });
});

describe('KubeCredentials.inCluster', () => {
  const sa = (token = 'tok-1') => {
    const dir = tmpDir();
    writeFileSync(path.join(dir, 'ca.crt'), 'CLUSTER-CA');
    writeFileSync(path.join(dir, 'token'), token);
    return dir;
  };

  it.each([
    { host: '10.96.0.1', port: '443', server: 'https://10.96.0.1:443' },
    { host: 'fd00::1', port: '443', server: 'https://[fd00::1]:443' },
    { host: 'kubernetes.default.svc', port: '6443', server: 'https://kubernetes.default.svc:6443' },
  ])('server from KUBERNETES_SERVICE_HOST=$host', async ({ host, port, server }) => {
    const creds = KubeCredentials.inCluster({ env: { KUBERNETES_SERVICE_HOST: host, KUBERNETES_SERVICE_PORT: port }, dir: sa() });
    expect(creds.getCurrentCluster().server).toBe(server);
    const o = await applied(creds);
    expect([o.ca?.toString(), o.headers]).toEqual(['CLUSTER-CA', { Authorization: 'Bearer tok-1' }]);
  });

  it.each([{}, { KUBERNETES_SERVICE_HOST: '10.96.0.1' }, { KUBERNETES_SERVICE_PORT: '443' }])('outside a pod (%j) says to pass --kubeconfig', (env) => {
    expect(() => KubeCredentials.inCluster({ env, dir: sa() })).toThrow(KubeconfigError);
    expect(() => KubeCredentials.inCluster({ env, dir: sa() })).toThrow(/pass --kubeconfig/);
  });

  it('follows token rotation: re-read once a minute, the last good token kept while the file is unreadable', async () => {
    const dir = sa('tok-1');
    let now = 1_000_000;
    const creds = KubeCredentials.inCluster({ env: { KUBERNETES_SERVICE_HOST: 'h', KUBERNETES_SERVICE_PORT: '443' }, dir, now: () => now });
    const bearer = async () => (await applied(creds)).headers;
    const steps: { atMs: number; file: string | null; want: string }[] = [
      { atMs: 0, file: null, want: 'tok-1' },
      { atMs: 1_000, file: 'tok-2', want: 'tok-1' }, // rotated on disk, not re-read yet
      { atMs: TOKEN_REREAD_MS - 1, file: null, want: 'tok-1' },
      { atMs: TOKEN_REREAD_MS + 1, file: null, want: 'tok-2' }, // a minute after the last read
      { atMs: 2 * TOKEN_REREAD_MS + 2, file: 'DELETE', want: 'tok-2' }, // mid-rotation: keep the last
      { atMs: 2 * TOKEN_REREAD_MS + 3, file: 'tok-3\n', want: 'tok-3' }, // failed read is retried on the next call
      { atMs: 4 * TOKEN_REREAD_MS, file: '', want: 'tok-3' }, // an empty file is not a token
    ];
    const start = now;
    for (const s of steps) {
      if (s.file === 'DELETE') rmSync(path.join(dir, 'token'));
      else if (s.file !== null) writeFileSync(path.join(dir, 'token'), s.file);
      now = start + s.atMs;
      expect(await bearer(), `at +${s.atMs} ms`).toEqual({ Authorization: `Bearer ${s.want}` });
    }
  });
});

describe('KubeCredentials with KubeApiClient over real TLS', () => {
  it('verifies the server against the CA and sends the client certificate and token', async () => {
    const dir = tmpDir();
    const pki = await generatePki(path.join(dir, 'pki'));
    const server = https.createServer({
      cert: readFileSync(pki.serving.cert), key: readFileSync(pki.serving.key),
      ca: readFileSync(pki.caCert), requestCert: true, rejectUnauthorized: true,
    }, (req, res) => {
      const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate();
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, auth: req.headers.authorization, cn: peer.subject?.CN }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      writeFileSync(path.join(dir, 'token'), 'secret-token');
      writeFileSync(path.join(dir, 'config'), kubeconfig(
        { server: `https://127.0.0.1:${port}/base`, 'certificate-authority': pki.caCert },
        { 'client-certificate': pki.admin.cert, 'client-key': pki.admin.key, tokenFile: 'token' },
      ));
      const creds = KubeCredentials.fromFile(path.join(dir, 'config'));
      const client = new KubeApiClient(creds as unknown as ConstructorParameters<typeof KubeApiClient>[0]);
      try {
        const got = await client.json<{ path: string; auth: string; cn: string }>('GET', '/api/v1/pods');
        expect(got.path).toBe('/base/api/v1/pods');
        expect(got.auth).toBe('Bearer secret-token');
        expect(got.cn).toBeTruthy();
      } finally {
        client.close();
      }
    } finally {
      server.close();
    }
  });
});

describe('the agent does not load @kubernetes/client-node at run time', () => {
  it('no module of the package is resolved when main.ts and agent.ts are imported', () => {
    // A resolve hook records every module the agent's import graph asks for.
    const hook = `import { registerHooks } from 'node:module';
const seen = [];
registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); seen.push(r.url); return r; } });
process.on('exit', () => process.stdout.write(JSON.stringify(seen)));`;
    const out = execFileSync(process.execPath, [
      '--import', `data:text/javascript,${encodeURIComponent(hook)}`,
      '--input-type=module', '-e', `await import(${JSON.stringify(path.join(ROOT, 'agent', 'agent.ts'))});`,
    ], { cwd: ROOT, encoding: 'utf8' });
    const urls = JSON.parse(out) as string[];
    expect(urls.some((u) => u.includes('/agent/kube/kubeconfig.ts'))).toBe(true);
    expect(urls.filter((u) => u.includes('@kubernetes/client-node'))).toEqual([]);
  });
});

describe('a JSON kubeconfig', () => {
  const loadsYaml = (text: string) => {
    const hook = `import { registerHooks } from 'node:module';
const seen = [];
registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); seen.push(r.url); return r; } });
process.on('exit', () => process.stdout.write(JSON.stringify(seen)));`;
    const out = execFileSync(process.execPath, [
      '--import', `data:text/javascript,${encodeURIComponent(hook)}`, '--input-type=module', '-e',
      `const { KubeCredentials } = await import(${JSON.stringify(path.join(ROOT, 'agent', 'kube', 'kubeconfig.ts'))});
       KubeCredentials.fromString(${JSON.stringify(text)}, '/');`,
    ], { cwd: ROOT, encoding: 'utf8' });
    return (JSON.parse(out) as string[]).some((u) => /\/node_modules\/yaml\//.test(u));
  };

  it('loads without the YAML parser (about 1 MiB of the agent), and a YAML one still loads it', () => {
    const json = kubeconfig({});
    expect(loadsYaml(json)).toBe(false);
    expect(loadsYaml(YAML.stringify(JSON.parse(json)))).toBe(true);
  });

  it('that is not valid JSON is read as YAML, with the YAML error', () => {
    expect(() => KubeCredentials.fromString('{ "apiVersion": "v1", ', '/')).toThrow(/not valid YAML or JSON/);
  });
});
