// Self-managed TLS for the webhook, so that installing it needs no cert-manager.
//
// One Secret (type kubernetes.io/tls) in the webhook's namespace holds a CA and the
// serving certificate it signed for the Service's DNS names; every replica serves the
// same pair. The MutatingWebhookConfiguration's caBundle is kept equal to the Secret's
// ca.crt. Steps, run at start and then every CHECK_MS (a minute: two cheap GETs, so that a
// pair another replica renewed, or a caBundle reset by re-applying the configuration, is
// caught up with at once, not within the hour):
//   1. Read the Secret. Absent: make a CA and a serving certificate and create it; a
//      409 means another replica won the race, so read theirs.
//   2. Renew what is due: the CA when less than CA_RENEW_MS of it is left, it is not valid
//      yet, or ca.key is not its key; the serving certificate when less than CERT_RENEW_MS
//      is left, it is not valid yet, its names differ, tls.key is not its key, or a new CA
//      came. A new CA goes first in ca.crt, and the CAs trusted until then stay after it
//      (the old ca.crt's, and the configuration's caBundle: after the Secret was deleted
//      that is the only record of the CA the other replicas still serve under), listed in
//      the annotation RETIRING_ANNOTATION. A replica drops the listed CAs once it has seen
//      that annotation for RETIRE_MS by its own monotonic clock (replicas' wall clocks may
//      differ); CAs it did not list (a bundle made by hand) are never dropped. Update with
//      the resourceVersion read, keeping the Secret's type, labels and annotations; a 409
//      means another replica renewed first: start again from step 1.
//   3. Patch caBundle in each webhook of the configuration that differs from ca.crt
//      (a JSON Patch guarded by a test of the resourceVersion read; when another replica
//      patched first, the test fails: read again and retry).
//   4. Serve the Secret's pair (server.setTls swaps it without dropping connections).
//
// Least RBAC: get/update on this one Secret and get/patch on this one configuration
// (resourceNames), create on secrets in the namespace (create cannot be narrowed by name).
//
// @peculiar/x509 (over WebCrypto) makes certificates; node:crypto's X509Certificate reads
// them. Both load only in the webhook process.

import 'reflect-metadata';
import { createPrivateKey, createPublicKey, X509Certificate, webcrypto, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';
import { ApiError, type ApiClient } from '../../kube/client.ts';
import { RETIRING_ANNOTATION } from '../../../projections/names.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const DAY = 86_400_000;
export const CA_LIFETIME_MS = 10 * 365 * DAY;
export const CA_RENEW_MS = 365 * DAY;
export const CERT_LIFETIME_MS = 365 * DAY;
export const CERT_RENEW_MS = 120 * DAY;
export const CHECK_MS = 60_000;
/**
 * How long a replaced CA stays in the bundle. Every replica takes the new pair up at its next
 * check (CHECK_MS), so this is slack for checks that fail; trusting a replaced CA longer only
 * widens what its key could sign, and deleting the Secret is how an operator revokes a CA.
 */
export const RETIRE_MS = 15 * 60_000;
/** On the Secret: the SHA-256 fingerprints of the CAs in ca.crt that a new CA replaced. */
/** Certificates are valid from this long before they are made (replicas' clocks differ). */
const BACKDATE_MS = 3_600_000;
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface ServingTls {
  cert: string;
  key: string;
  /** PEM, one or two CAs: what the configuration's caBundle must hold. */
  caBundle: string;
}

export interface CertOptions {
  namespace: string;
  secretName: string;
  /** The Service's DNS names (service, service.ns, service.ns.svc) and any extra (127.0.0.1 for tests). */
  dnsNames: readonly string[];
  ipAddresses?: readonly string[];
  now?: () => number;
  /** PEM: the CAs the API server trusts now (the configuration's caBundle), read only when a new CA is made. */
  trusted?: () => Promise<string>;
  /** Milliseconds since this process first saw `key` (firstSeen); without it, replaced CAs are never dropped. */
  seenFor?: (key: string) => number;
}

/** A monotonic "how long since I first saw this", one per process: the replicas' wall clocks may differ. */
export function firstSeen(now: () => number = () => performance.now()): (key: string) => number {
  const seen = new Map<string, number>();
  return (key) => {
    const t = now();
    if (!seen.has(key)) seen.set(key, t);
    return t - seen.get(key)!;
  };
}

interface SecretData { 'tls.crt': string; 'tls.key': string; 'ca.crt': string; 'ca.key': string }
interface Secret {
  metadata: { resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  type?: string;
  data?: Record<string, string>;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined) => Buffer.from(s ?? '', 'base64').toString('utf8');

function pemKey(der: ArrayBuffer): string {
  return x509.PemConverter.encode(der, 'PRIVATE KEY') + '\n';
}

async function makeCa(now: number): Promise<{ cert: string; key: string }> {
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(), name: `CN=ownerrefs-webhook-ca-${Math.floor(now / 1000)}`, keys, signingAlgorithm: ALG,
    notBefore: new Date(now - BACKDATE_MS), notAfter: new Date(now + CA_LIFETIME_MS),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString('pem') + '\n', key: pemKey(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)) };
}

async function makeServing(ca: { cert: string; key: string }, o: CertOptions, now: number): Promise<{ cert: string; key: string }> {
  const caCert = new x509.X509Certificate(ca.cert);
  const caKey = await webcrypto.subtle.importKey('pkcs8', x509.PemConverter.decodeFirst(ca.key), ALG, false, ['sign']);
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(), subject: `CN=${o.dnsNames[0] ?? 'ownerrefs-webhook'}`, issuer: caCert.subject,
    notBefore: new Date(now - BACKDATE_MS), notAfter: new Date(now + CERT_LIFETIME_MS),
    publicKey: keys.publicKey, signingKey: caKey, signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...o.dnsNames.map((value) => ({ type: 'dns' as const, value })),
        ...(o.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
      ]),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { cert: cert.toString('pem') + '\n', key: pemKey(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)) };
}

function serial(): string {
  const b = webcrypto.getRandomValues(new Uint8Array(16));
  b[0] = b[0]! & 0x7f; // positive
  return Buffer.from(b).toString('hex');
}

/** The PEM blocks of a bundle. */
function pems(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g)?.map((p) => p.trimEnd() + '\n') ?? [];
}

/** An IP address in one spelling: Node prints IPv6 SANs uncompressed (0:0:0:0:0:0:0:1), flags give ::1. */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]`).hostname.slice(1, -1) : ip;
}

function names(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '').split(', ').filter(Boolean)
    .map((n) => (n.startsWith('IP Address:') ? `IP:${canonicalIp(n.slice('IP Address:'.length))}` : n)).sort();
}

function wanted(o: CertOptions): string[] {
  return [...o.dnsNames.map((d) => `DNS:${d}`), ...(o.ipAddresses ?? []).map((i) => `IP:${canonicalIp(i)}`)].sort();
}

/** The private key in `pem`, or undefined when it does not parse. */
function privateKey(pem: string | undefined): KeyObject | undefined {
  try {
    return pem ? createPrivateKey(pem) : undefined;
  } catch {
    return undefined;
  }
}

/** `key` is the private half of `cert`'s public key. */
function keyOf(cert: X509Certificate, key: KeyObject | undefined): boolean {
  if (!key) return false;
  const spki = (k: KeyObject) => k.export({ type: 'spki', format: 'der' });
  return spki(createPublicKey(key)).equals(spki(cert.publicKey));
}

/** Not yet valid (a replica whose clock runs fast made it), or too close to its end. */
function outOfTime(cert: X509Certificate, now: number, renewMs: number): boolean {
  return Date.parse(cert.validFrom) > now || Date.parse(cert.validTo) - now < renewMs;
}

/** The CAs among `pem` that are valid at `now`, each once. */
function validCas(pem: string, now: number): string[] {
  const seen = new Set<string>();
  return pems(pem).filter((p) => {
    try {
      const c = new X509Certificate(p);
      if (!c.ca || outOfTime(c, now, 0) || seen.has(c.fingerprint256)) return false;
      seen.add(c.fingerprint256);
      return true;
    } catch {
      return false;
    }
  });
}

/** Step 2's verdicts on what the Secret holds: make a new CA, a new serving certificate. */
export function due(data: Partial<SecretData>, o: CertOptions, now: number): { ca: boolean; cert: boolean } {
  let ca: X509Certificate;
  try {
    ca = new X509Certificate(data['ca.key'] ? pems(data['ca.crt'] ?? '')[0] ?? '' : '');
  } catch {
    return { ca: true, cert: true };
  }
  // A ca.key that is not the CA's would sign certificates nobody trusts.
  const caDue = outOfTime(ca, now, CA_RENEW_MS) || !keyOf(ca, privateKey(data['ca.key']));
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(data['tls.crt'] ?? '');
  } catch {
    return { ca: caDue, cert: true };
  }
  // A tls.key that is not the certificate's would make every replica fail to serve.
  const certDue = caDue || outOfTime(cert, now, CERT_RENEW_MS) || !cert.checkIssued(ca) || !cert.verify(ca.publicKey) ||
    names(cert).join(',') !== wanted(o).join(',') || !keyOf(cert, privateKey(data['tls.key']));
  return { ca: caDue, cert: certDue };
}

const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

/**
 * The CAs of `bundle` listed in `retiring` (the annotation), once this replica has seen that
 * list for RETIRE_MS; never the first, which signs the serving certificate (an annotation
 * edited by hand could list it).
 */
function retired(bundle: string, retiring: string | undefined, o: CertOptions): Set<string> {
  if (!retiring || !o.seenFor || o.seenFor(retiring) < RETIRE_MS) return new Set();
  const listed = new Set(retiring.split(','));
  return new Set(pems(bundle).slice(1).filter((p) => { try { return listed.has(fingerprint(p)); } catch { return false; } }));
}

/** Steps 1-2: the Secret's pair after making or renewing what was due. */
export async function ensureServingTls(api: ApiClient, o: CertOptions): Promise<ServingTls> {
  const now = (o.now ?? Date.now)();
  const path = `/api/v1/namespaces/${o.namespace}/secrets/${o.secretName}`;
  for (let attempt = 0; attempt < 5; attempt++) {
    const secret = await api.json<Secret>('GET', path).catch((err: unknown) => {
      if (err instanceof ApiError && err.status === 404) return undefined;
      throw err;
    });
    const data: Partial<SecretData> = Object.fromEntries(Object.entries(secret?.data ?? {}).map(([k, v]) => [k, unb64(v)]));
    const d = due(data, o, now);
    const retiring = secret?.metadata.annotations?.[RETIRING_ANNOTATION];
    const drop = d.ca ? new Set<string>() : retired(data['ca.crt'] ?? '', retiring, o);
    if (secret && !d.ca && !d.cert && drop.size === 0) return { cert: data['tls.crt']!, key: data['tls.key']!, caBundle: data['ca.crt']! };
    let ca = { cert: pems(data['ca.crt'] ?? '')[0] ?? '', key: data['ca.key'] ?? '' };
    let bundle = data['ca.crt'] ?? '';
    let nextRetiring = drop.size > 0 ? undefined : retiring;
    if (d.ca) {
      // Still trusted beside the new CA, so that a replica serving a pair they signed is
      // called until its next check: the old ca.crt's and the configuration's (at most two).
      const before = validCas(bundle + (await o.trusted?.() ?? ''), now).slice(0, 2);
      ca = await makeCa(now);
      bundle = [ca.cert, ...before].join('');
      nextRetiring = before.length > 0 ? before.map(fingerprint).join(',') : undefined;
    } else if (drop.size > 0) {
      bundle = pems(bundle).filter((p, i) => i === 0 || !drop.has(p)).join(''); // the signer stays, even repeated further on
    }
    const serving = d.cert ? await makeServing(ca, o, now) : { cert: data['tls.crt']!, key: data['tls.key']! };
    const next: SecretData = { 'tls.crt': serving.cert, 'tls.key': serving.key, 'ca.crt': bundle, 'ca.key': ca.key };
    const annotations = Object.fromEntries(Object.entries(secret?.metadata.annotations ?? {}).filter(([k]) => k !== RETIRING_ANNOTATION));
    if (nextRetiring) annotations[RETIRING_ANNOTATION] = nextRetiring;
    const body = {
      // A Secret's type cannot change: one made by hand as Opaque keeps its type.
      apiVersion: 'v1', kind: 'Secret', type: secret?.type ?? 'kubernetes.io/tls',
      metadata: {
        name: o.secretName, namespace: o.namespace, labels: { ...secret?.metadata.labels, 'app.kubernetes.io/name': 'ownerrefs-webhook' }, annotations,
        ...(secret ? { resourceVersion: secret.metadata.resourceVersion } : {}),
      },
      data: Object.fromEntries(Object.entries(next).map(([k, v]) => [k, b64(v)])),
    };
    try {
      if (secret) await api.json('PUT', path, body);
      else await api.json('POST', `/api/v1/namespaces/${o.namespace}/secrets`, body);
      return { cert: next['tls.crt'], key: next['tls.key'], caBundle: next['ca.crt'] };
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) continue; // another replica wrote first: use theirs
      throw err;
    }
  }
  throw new Error(`secret ${o.namespace}/${o.secretName} kept changing under five attempts to renew it`);
}

interface WebhookConfig { metadata: { resourceVersion?: string }; webhooks?: { name: string; clientConfig?: { caBundle?: string } }[] }

/** PEM: the caBundles of the configuration's webhooks (CertOptions.trusted); none while it does not exist. */
export async function configuredCas(api: ApiClient, configName: string): Promise<string> {
  const cfg = await api.json<WebhookConfig>('GET', `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${configName}`).catch((err: unknown) => {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  });
  return (cfg?.webhooks ?? []).map((w) => unb64(w.clientConfig?.caBundle)).filter(Boolean).join('\n');
}

/**
 * Step 3; returns how many webhooks were patched. Another replica patching between our
 * read and our patch fails the test (422) or conflicts (409): read again, at most 5 times.
 */
export async function syncCaBundle(api: ApiClient, configName: string, caBundle: string): Promise<number> {
  const path = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${configName}`;
  const want = b64(caBundle);
  for (let attempt = 0; ; attempt++) {
    const cfg = await api.json<WebhookConfig>('GET', path);
    const ops = (cfg.webhooks ?? []).flatMap((w, i) => (w.clientConfig?.caBundle === want ? [] : [{ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: want }]));
    if (ops.length === 0) return 0;
    try {
      await api.json('PATCH', path, [{ op: 'test', path: '/metadata/resourceVersion', value: cfg.metadata.resourceVersion }, ...ops], 'application/json-patch+json');
      return ops.length;
    } catch (err) {
      const raced = err instanceof ApiError && (err.status === 409 || err.status === 422);
      if (!raced || attempt >= 4) throw err;
    }
  }
}
