// Requests sent as another identity through the API server's impersonation: the server
// authenticates the admin, then authorizes and admits the request as that user and those
// groups, as if they had sent it. Attack tests use it to try each path as a narrowly granted
// ServiceAccount or as a node's kubelet without minting their credentials.
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** Who a request is sent as; {} is the admin of the kubeconfig itself. */
export interface Identity { user?: string; groups?: string[]; extra?: Record<string, string> }

export const ADMIN: Identity = {};

export const serviceAccountIdentity = (namespace: string, name: string): Identity =>
  ({ user: `system:serviceaccount:${namespace}:${name}`, groups: ['system:serviceaccounts', 'system:authenticated'] });

/** The kubelet of `nodeName`, as the Node authorizer and NodeRestriction know it. */
export const kubeletIdentity = (nodeName: string): Identity =>
  ({ user: `system:node:${nodeName}`, groups: ['system:nodes', 'system:authenticated'] });

/** One request sent as `as`; its answer as a code (any 2xx is 200) and the refusal's message. */
export async function requestAs(kc: KubeConfig, as: Identity, method: string, urlPath: string, body: object,
  contentType = 'application/json'): Promise<{ code: number; message: string }> {
  const server = new URL(kc.getCurrentCluster()!.server);
  const opts: https.RequestOptions = { method, hostname: server.hostname, port: server.port, path: urlPath, headers: { 'Content-Type': contentType } };
  await kc.applyToHTTPSOptions(opts);
  if (as.user) opts.headers = { ...opts.headers, 'Impersonate-User': as.user, 'Impersonate-Group': as.groups ?? [],
    ...Object.fromEntries(Object.entries(as.extra ?? {}).map(([k, v]) => [`Impersonate-Extra-${encodeURIComponent(k)}`, v])) };
  return new Promise((resolve, reject) => {
    const req = https.request(opts, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => { text += d.toString(); });
      res.on('end', () => {
        const code = res.statusCode ?? 0;
        resolve({ code: code < 300 ? 200 : code, message: code < 300 ? '' : (JSON.parse(text) as { message: string }).message });
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
