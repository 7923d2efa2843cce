// A mutating admission webhook of the harness's own, in this process, registered with the real
// API server by URL: what a test needs to stand in for the webhooks clusters already run
// beside ours (a policy engine stamping every pod update, the OpenTelemetry operator's SDK
// injection). It answers with the JSON Patch its `mutate` returns; its self-signed pair for
// 127.0.0.1 is made by openssl and is its own caBundle.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { AdmissionregistrationV1Api, type KubeConfig, type V1MatchCondition, type V1Pod } from '@kubernetes/client-node';

export interface JsonPatchOp { op: 'add' | 'replace' | 'remove'; path: string; value?: unknown }

export interface AdmissionRequest { operation: string; userInfo: { username: string }; object: V1Pod; oldObject?: V1Pod; namespace: string }

export interface TestWebhookOptions {
  /** The MutatingWebhookConfiguration's name: the API server calls mutating webhooks in the order of these names. */
  name: string;
  /** Pods in this namespace only (its kubernetes.io/metadata.name label), so that other files' pods never meet it. */
  namespace: string;
  operations: ('CREATE' | 'UPDATE')[];
  mutate(req: AdmissionRequest): JsonPatchOp[];
  /** How long to wait before answering (a slow webhook: writes that land meanwhile make the request's precondition stale). */
  delayMs?(req: AdmissionRequest): number;
  /** A refusal with this code and message (as a policy engine answers: Kyverno's come as 400), instead of mutate's patch. */
  deny?(req: AdmissionRequest): { code: number; message: string } | undefined;
  matchConditions?: V1MatchCondition[];
  /** false: answer without keeping each request in `requests` (a benchmark's thousands of pods). */
  keepRequests?: boolean;
}

export interface TestWebhook {
  readonly name: string;
  /** The requests it answered, in order. */
  readonly requests: readonly AdmissionRequest[];
  /** Stops serving and deletes its configuration. */
  remove(): Promise<void>;
}

/** `~1`/`~0` escaping of a JSON Pointer segment (RFC 6901), for annotation keys with a '/'. */
export const pointer = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

export async function startTestWebhook(admin: KubeConfig, o: TestWebhookOptions): Promise<TestWebhook> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'testwebhook-'));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const requests: AdmissionRequest[] = [];
  const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: AdmissionRequest & { uid: string } };
      if (o.keepRequests !== false) requests.push(review.request);
      setTimeout(() => answer(review), o.delayMs?.(review.request) ?? 0);
    });
    const answer = (review: { request: AdmissionRequest & { uid: string } }) => {
      const denied = o.deny?.(review.request);
      const ops = denied ? [] : o.mutate(review.request);
      const response: Record<string, unknown> = denied ? { uid: review.request.uid, allowed: false, status: denied } : { uid: review.request.uid, allowed: true };
      if (ops.length > 0) Object.assign(response, { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }));
    };
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const reg = admin.makeApiClient(AdmissionregistrationV1Api);
  await reg.deleteMutatingWebhookConfiguration({ name: o.name }).catch(() => undefined);
  await reg.createMutatingWebhookConfiguration({ body: { metadata: { name: o.name }, webhooks: [{
    name: `${o.name}.webhooks.test`, admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail', timeoutSeconds: 5,
    reinvocationPolicy: 'Never', matchPolicy: 'Equivalent',
    clientConfig: { url: `https://127.0.0.1:${port}/mutate`, caBundle: readFileSync(cert).toString('base64') },
    rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: o.operations, resources: ['pods'], scope: 'Namespaced' }],
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': o.namespace } },
    ...o.matchConditions ? { matchConditions: o.matchConditions } : {},
  }] } });
  return {
    name: o.name,
    requests,
    async remove() {
      await reg.deleteMutatingWebhookConfiguration({ name: o.name }).catch((err: unknown) => { if ((err as { code?: number }).code !== 404) throw err; });
      await new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
