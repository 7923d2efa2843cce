// Credentials for the agent's API client: a kubeconfig file or the pod's service account.
//
// Why not @kubernetes/client-node's KubeConfig: its config module imports the package's
// whole generated API, about 80 MB of RSS before any work, and the agent runs on every
// node (see docs/PERFORMANCE.md). This loader covers what a node agent is deployed with
// and refuses the rest with a clear error instead of half-supporting it:
//
//   in-cluster   KUBERNETES_SERVICE_HOST/PORT, the service account's ca.crt and token;
//                the token file is re-read (kubelet rotates projected tokens) at most
//                once a minute, like client-go; a failed re-read keeps the last token.
//   kubeconfig   current-context -> cluster (server, certificate-authority(-data),
//                tls-server-name, insecure-skip-tls-verify) and user (token, tokenFile,
//                client-certificate(-data), client-key(-data)). Relative paths are
//                relative to the kubeconfig's directory, as kubectl does.
//   refused      exec and auth-provider plugins, basic auth, impersonation, proxy-url,
//                and a file and inline form of the same thing at once.
//
// The two public methods have the shape of KubeConfig's getCurrentCluster and
// applyToHTTPSOptions, the only ones KubeApiClient (client.ts) calls. Files named by
// the config (CA, client certificate and key) are read on every call, so rotated
// material is picked up; the client rebuilds its TLS agent when the bytes change.

import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { RequestOptions } from 'node:https';
import { createRequire } from 'node:module';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import { ConfigError } from '../common/errors.ts';
import { isRecord } from '../../projections/types.ts';

// yaml is loaded only when a kubeconfig file is read: in a pod (in-cluster) it is not
// needed, and it costs ~2.5 MB RSS. Synchronous, because loading credentials is.
/** The document when `text` is a JSON object, else undefined (then it is read as YAML). */
function jsonObject(text: string): unknown {
  if (!text.trimStart().startsWith('{')) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
const parseYaml = (text: string): unknown => (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go re-reads a token file once a minute; so do we. */
export const TOKEN_REREAD_MS = 60_000;

export class KubeconfigError extends ConfigError {
  override name = 'KubeconfigError';
}

/** What KubeApiClient needs to know of the cluster (a subset of client-node's Cluster). */
export interface ClusterInfo {
  readonly name: string;
  readonly server: string;
  readonly skipTLSVerify: boolean;
  readonly tlsServerName?: string;
}

/** Inline bytes, or a file read each time the material is used. */
type Material = { data: Buffer } | { file: string };

interface Parts {
  cluster: ClusterInfo;
  ca?: Material | undefined;
  cert?: Material | undefined;
  key?: Material | undefined;
  token?: string | undefined;
  tokenFile?: string | undefined;
}

export interface LoadOptions {
  /** Milliseconds clock for the token re-read interval (tests pass a fake). */
  now?: () => number;
}

export class KubeCredentials {
  readonly #p: Parts;
  readonly #now: () => number;
  #token: { value: string; readAt: number } | undefined;

  private constructor(parts: Parts, opts: LoadOptions) {
    this.#p = parts;
    this.#now = opts.now ?? Date.now;
    // Fail at start-up, not at the first request, when the token file is unreadable.
    if (parts.tokenFile !== undefined) this.#token = { value: readToken(parts.tokenFile), readAt: this.#now() };
  }

  /** The pod's service account (what the DaemonSet uses). `dir` is for tests. */
  static inCluster(opts: LoadOptions & { env?: NodeJS.ProcessEnv; dir?: string } = {}): KubeCredentials {
    const env = opts.env ?? process.env;
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT;
    if (!host || !port) {
      throw new KubeconfigError('not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset; pass --kubeconfig');
    }
    const dir = opts.dir ?? SERVICE_ACCOUNT_DIR;
    const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
    return new KubeCredentials({
      cluster: { name: 'in-cluster', server, skipTLSVerify: false },
      ca: { file: path.join(dir, 'ca.crt') },
      tokenFile: path.join(dir, 'token'),
    }, opts);
  }

  /**
   * A kubeconfig file when one is named, else the in-cluster service account (every command's
   * default). Our own loader, not client-node's KubeConfig, whose import costs 60-80 MB of RSS
   * per node (docs/PERFORMANCE.md).
   */
  static load(file: string | undefined): KubeCredentials {
    return file ? KubeCredentials.fromFile(file) : KubeCredentials.inCluster();
  }

  static fromFile(file: string, opts: LoadOptions = {}): KubeCredentials {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new KubeconfigError(`cannot read kubeconfig ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    return KubeCredentials.fromString(text, path.dirname(path.resolve(file)), opts, file);
  }

  /** `baseDir` resolves relative file names in the config. */
  static fromString(text: string, baseDir: string, opts: LoadOptions = {}, source = 'kubeconfig'): KubeCredentials {
    let doc: unknown;
    try {
      // JSON (what tools that write kubeconfigs for programs often emit) without loading the
      // YAML parser, which costs the agent about 1 MiB; anything else is YAML, a superset.
      doc = jsonObject(text) ?? parseYaml(text);
    } catch (err) {
      throw new KubeconfigError(`${source}: not valid YAML or JSON: ${(err as Error).message}`);
    }
    return new KubeCredentials(partsOf(doc, baseDir, source), opts);
  }

  getCurrentCluster(): ClusterInfo {
    return this.#p.cluster;
  }

  /** Sets ca, cert, key, rejectUnauthorized, servername and the Authorization header. */
  async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const p = this.#p;
    if (p.cluster.skipTLSVerify) opts.rejectUnauthorized = false;
    if (p.cluster.tlsServerName) opts.servername = p.cluster.tlsServerName;
    if (p.ca) opts.ca = await materialize(p.ca, 'certificate authority');
    if (p.cert) opts.cert = await materialize(p.cert, 'client certificate');
    if (p.key) opts.key = await materialize(p.key, 'client key');
    const token = p.tokenFile !== undefined ? this.#fileToken(p.tokenFile) : p.token;
    if (token) opts.headers = { ...(opts.headers as Record<string, string> | undefined), Authorization: `Bearer ${token}` };
  }

  #fileToken(file: string): string {
    const t = this.#token!;
    if (this.#now() - t.readAt < TOKEN_REREAD_MS) return t.value;
    try {
      this.#token = { value: readToken(file), readAt: this.#now() };
    } catch {
      // Mid-rotation or briefly unreadable: the last token is likely still valid; retry next call.
      return t.value;
    }
    return this.#token.value;
  }
}

function readToken(file: string): string {
  let value: string;
  try {
    value = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new KubeconfigError(`cannot read token file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  if (!value) throw new KubeconfigError(`token file ${file} is empty`);
  return value;
}

async function materialize(m: Material, what: string): Promise<Buffer> {
  if ('data' in m) return m.data;
  try {
    return await readFile(m.file);
  } catch (err) {
    throw new KubeconfigError(`cannot read ${what} ${m.file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

type Obj = Record<string, unknown>;

/** The entry named `name` in a kubeconfig list (clusters, users, contexts), unwrapped. */
function named(doc: Obj, list: string, field: string, name: string, source: string): Obj {
  const items = Array.isArray(doc[list]) ? (doc[list] as unknown[]) : [];
  const hit = items.find((i) => isRecord(i) && i.name === name) as Obj | undefined;
  if (!hit) throw new KubeconfigError(`${source}: ${list} has no entry named ${JSON.stringify(name)}`);
  const inner = hit[field];
  if (!isRecord(inner)) throw new KubeconfigError(`${source}: ${list} entry ${JSON.stringify(name)} has no ${field}`);
  return inner;
}

function partsOf(doc: unknown, baseDir: string, source: string): Parts {
  if (!isRecord(doc)) throw new KubeconfigError(`${source}: not a kubeconfig (expected a mapping)`);
  const current = doc['current-context'];
  if (typeof current !== 'string' || !current) throw new KubeconfigError(`${source}: current-context is not set`);
  const ctx = named(doc, 'contexts', 'context', current, source);
  if (typeof ctx.cluster !== 'string') throw new KubeconfigError(`${source}: context ${JSON.stringify(current)} names no cluster`);
  const c = named(doc, 'clusters', 'cluster', ctx.cluster, source);
  const u = typeof ctx.user === 'string' && ctx.user ? named(doc, 'users', 'user', ctx.user, source) : {};

  const str = (o: Obj, k: string): string | undefined => {
    const v = o[k];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new KubeconfigError(`${source}: ${k} must be a string`);
    return v;
  };
  const file = (f: string) => path.resolve(baseDir, f);
  // client-go's validation refuses both forms at once; so do we, rather than guess.
  const material = (o: Obj, fileKey: string, dataKey: string): Material | undefined => {
    const f = str(o, fileKey);
    const d = str(o, dataKey);
    if (f && d) throw new KubeconfigError(`${source}: both ${fileKey} and ${dataKey} are set; keep one`);
    if (d) return { data: Buffer.from(d, 'base64') };
    return f ? { file: file(f) } : undefined;
  };

  for (const [k, why] of [
    ['exec', 'exec credential plugins are not supported by the agent; use a token, tokenFile or client certificate'],
    ['auth-provider', 'auth-provider plugins are not supported by the agent; use a token, tokenFile or client certificate'],
    ['username', 'basic authentication is not supported (the API server removed it in 1.19)'],
    ['password', 'basic authentication is not supported (the API server removed it in 1.19)'],
    ['as', 'impersonation is not supported by the agent'],
  ] as const) {
    if (u[k] !== undefined && u[k] !== null) throw new KubeconfigError(`${source}: user field ${k}: ${why}`);
  }
  if (str(c, 'proxy-url')) throw new KubeconfigError(`${source}: proxy-url is not supported by the agent; it connects to the server directly`);

  const server = str(c, 'server');
  if (!server) throw new KubeconfigError(`${source}: cluster ${JSON.stringify(ctx.cluster)} has no server`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeconfigError(`${source}: server ${JSON.stringify(server)} is not a URL`);
  }
  if (url.protocol !== 'https:') throw new KubeconfigError(`${source}: server must be https://, got ${JSON.stringify(server)}`);

  const skip = c['insecure-skip-tls-verify'] === true;
  const ca = material(c, 'certificate-authority', 'certificate-authority-data');
  if (skip && ca) throw new KubeconfigError(`${source}: insecure-skip-tls-verify with a certificate authority is contradictory; keep one`);
  const cert = material(u, 'client-certificate', 'client-certificate-data');
  const key = material(u, 'client-key', 'client-key-data');
  if (!cert !== !key) throw new KubeconfigError(`${source}: a client certificate needs both the certificate and the key`);
  const token = str(u, 'token');
  const tokenFile = str(u, 'tokenFile');
  // client-go documents one precedence and applies the other at run time; refuse instead.
  if (token && tokenFile) throw new KubeconfigError(`${source}: both token and tokenFile are set; keep one`);
  const tlsServerName = str(c, 'tls-server-name');
  return {
    cluster: { name: ctx.cluster, server, skipTLSVerify: skip, ...(tlsServerName ? { tlsServerName } : {}) },
    ca, cert, key, token,
    tokenFile: tokenFile && file(tokenFile),
  };
}
