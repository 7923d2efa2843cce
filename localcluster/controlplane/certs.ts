// Throwaway PKI for the test control plane, generated with the openssl CLI so
// the harness needs no crypto code of its own.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface KeyPair {
  cert: string;
  key: string;
}

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  // Serving cert for 127.0.0.1/localhost, shared by every component that serves.
  serving: KeyPair;
  admin: KeyPair;
  controllerManager: KeyPair;
  scheduler: KeyPair;
  // RSA pair that signs/verifies service-account tokens.
  saKey: string;
  saPub: string;
}

// Extensions are kept in sections so a leaf can never inherit the CA's
// basicConstraints from the default openssl.cnf.
const OPENSSL_CNF = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc
authorityKeyIdentifier = keyid
[client_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
`;

// EC keys: generation is instant, unlike RSA, and Go accepts them everywhere.
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args);
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args.join(' ')} failed: ${e.stderr ?? e.message}`);
  }
}

export async function generatePki(dir: string): Promise<Pki> {
  await mkdir(dir, { recursive: true });
  const cnf = join(dir, 'openssl.cnf');
  await writeFile(cnf, OPENSSL_CNF);
  const caCert = join(dir, 'ca.crt');
  const caKey = join(dir, 'ca.key');
  await openssl(['req', '-x509', '-config', cnf, '-extensions', 'ca_ext', ...EC_KEY,
    '-keyout', caKey, '-out', caCert, '-days', '3650', '-subj', '/CN=ownerrefs-test-ca']);

  const leaf = async (name: string, subject: string, ext: string): Promise<KeyPair> => {
    const pair = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
    await openssl(['req', '-x509', '-config', cnf, '-extensions', ext, ...EC_KEY,
      '-CA', caCert, '-CAkey', caKey, '-keyout', pair.key, '-out', pair.cert,
      '-days', '365', '-subj', subject]);
    return pair;
  };
  const saKey = join(dir, 'sa.key');
  const saPub = join(dir, 'sa.pub');
  const [serving, admin, controllerManager, scheduler] = await Promise.all([
    leaf('serving', '/CN=kube-apiserver', 'server_ext'),
    leaf('admin', '/O=system:masters/CN=admin', 'client_ext'),
    // The bootstrap RBAC policy grants these well-known user names exactly
    // what the real components need, so they run unprivileged as in kubeadm.
    leaf('controller-manager', '/CN=system:kube-controller-manager', 'client_ext'),
    leaf('scheduler', '/CN=system:kube-scheduler', 'client_ext'),
    openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', saKey]),
  ]);
  await openssl(['pkey', '-in', saKey, '-pubout', '-out', saPub]);
  return { dir, caCert, caKey, serving, admin, controllerManager,
    scheduler, saKey, saPub };
}

// Kubeconfig written as JSON, which both client-go and client-node parse as YAML.
/** A certificate signed by the cluster CA: `ext` is client_ext or server_ext (SANs 127.0.0.1, localhost, and kubernetes.default.svc: the name real nodes' pods reach the API server by). */
export async function issueCert(pki: Pki, name: string, subject: string, ext: 'client_ext' | 'server_ext'): Promise<KeyPair> {
  const pair = { cert: join(pki.dir, `${name}.crt`), key: join(pki.dir, `${name}.key`) };
  await openssl(['req', '-x509', '-config', join(pki.dir, 'openssl.cnf'), '-extensions', ext, ...EC_KEY,
    '-CA', pki.caCert, '-CAkey', pki.caKey, '-keyout', pair.key, '-out', pair.cert, '-days', '365', '-subj', subject]);
  return pair;
}

export async function writeKubeconfig(path: string, server: string, caCert: string, user: KeyPair,
  userName: string): Promise<void> {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'ownerrefs-test', cluster: { server, 'certificate-authority': caCert } }],
    users: [{ name: userName, user: { 'client-certificate': user.cert, 'client-key': user.key } }],
    contexts: [{ name: 'ownerrefs-test', context: { cluster: 'ownerrefs-test', user: userName } }],
    'current-context': 'ownerrefs-test',
  };
  await writeFile(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
}
