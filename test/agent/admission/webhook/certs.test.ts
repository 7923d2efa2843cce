import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ApiError, type ApiClient } from '../../../../agent/kube/client.ts';
import { generateKeyPairSync } from 'node:crypto';
import { CERT_LIFETIME_MS, CERT_RENEW_MS, CA_LIFETIME_MS, CA_RENEW_MS, RETIRE_MS, configuredCas, due, ensureServingTls, firstSeen, syncCaBundle } from '../../../../agent/admission/webhook/certs.ts';
import { notServable } from '../../../../agent/admission/webhook/tlssource.ts';
import { RETIRING_ANNOTATION } from '../../../../projections/names.ts';

/** An API server holding one Secret and one webhook configuration, with resourceVersions and conflicts. */
function fakeApi(opts: { raceOnce?: boolean } = {}) {
  let secret: { metadata: { resourceVersion: string; labels?: Record<string, string>; annotations?: Record<string, string> }; data: Record<string, string> } | undefined;
  let cfg = { metadata: { resourceVersion: '1' }, webhooks: [{ name: 'a', clientConfig: {} as { caBundle?: string } }, { name: 'b', clientConfig: {} as { caBundle?: string } }] };
  let rv = 1;
  let race = opts.raceOnce ?? false;
  const calls: string[] = [];
  const api: ApiClient = {
    async json<T>(method: string, path: string, body?: unknown): Promise<T> {
      calls.push(`${method} ${path.split('/').slice(-1)[0]}`);
      if (path.includes('mutatingwebhookconfigurations')) {
        if (method === 'GET') return structuredClone(cfg) as T;
        const ops = body as { op: string; path: string; value: string }[];
        if (ops[0]!.value !== cfg.metadata.resourceVersion) throw new ApiError(422, 'Invalid', 'test failed');
        for (const op of ops.slice(1)) cfg.webhooks[Number(op.path.split('/')[2])]!.clientConfig.caBundle = op.value;
        cfg = { ...cfg, metadata: { resourceVersion: String(++rv) } };
        return cfg as T;
      }
      if (method === 'GET') {
        if (!secret) throw new ApiError(404, 'NotFound', 'not found');
        return structuredClone(secret) as T;
      }
      const b = body as { metadata: { resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; data: Record<string, string> };
      const meta = () => ({ resourceVersion: String(++rv), ...(b.metadata.labels ? { labels: b.metadata.labels } : {}), ...(b.metadata.annotations ? { annotations: b.metadata.annotations } : {}) });
      if (race) { // another replica writes first
        race = false;
        secret = { metadata: meta(), data: b.data };
        throw new ApiError(409, 'AlreadyExists', 'conflict');
      }
      if (method === 'POST' && secret) throw new ApiError(409, 'AlreadyExists', 'exists');
      if (method === 'PUT' && b.metadata.resourceVersion !== secret?.metadata.resourceVersion) throw new ApiError(409, 'Conflict', 'stale');
      secret = { metadata: meta(), data: b.data };
      return secret as T;
    },
    stream: () => Promise.reject(new Error('no streams')),
  };
  return { api, calls, secret: () => secret, cfg: () => cfg, deleteSecret: () => { secret = undefined; } };
}

const certsOf = (bundle: string) => bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g)!.map((p) => p.trimEnd() + '\n');

const OPTS = { namespace: 'ownerrefs-system', secretName: 'tls', dnsNames: ['svc', 'svc.ownerrefs-system', 'svc.ownerrefs-system.svc'], ipAddresses: ['127.0.0.1'] };

describe('self-managed TLS', () => {
  it('makes a CA and a serving certificate for the Service names, and keeps the caBundle equal to it', async () => {
    const f = fakeApi();
    const t = await ensureServingTls(f.api, OPTS);
    const cert = new X509Certificate(t.cert);
    const ca = new X509Certificate(t.caBundle);
    expect(cert.checkIssued(ca) && cert.verify(ca.publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe('DNS:svc, DNS:svc.ownerrefs-system, DNS:svc.ownerrefs-system.svc, IP Address:127.0.0.1');
    expect(ca.ca).toBe(true);
    expect(await syncCaBundle(f.api, 'ownerrefs.dev', t.caBundle)).toBe(2);
    expect(f.cfg().webhooks.map((w) => Buffer.from(w.clientConfig.caBundle!, 'base64').toString())).toEqual([t.caBundle, t.caBundle]);
    expect(await syncCaBundle(f.api, 'ownerrefs.dev', t.caBundle)).toBe(0); // nothing to patch the second time
  });

  it('reuses what the Secret holds while it is good (a second replica, a restart)', async () => {
    const f = fakeApi();
    const a = await ensureServingTls(f.api, OPTS);
    const b = await ensureServingTls(f.api, OPTS);
    expect(b).toEqual(a);
    expect(f.calls.filter((c) => c.startsWith('PUT') || c.startsWith('POST'))).toHaveLength(1);
  });

  it('takes the other replica\'s pair when it lost the race to create the Secret', async () => {
    const f = fakeApi({ raceOnce: true });
    const t = await ensureServingTls(f.api, OPTS);
    expect(Buffer.from(f.secret()!.data['tls.crt']!, 'base64').toString()).toBe(t.cert);
  });

  it('renews the serving certificate when it is due, keeping the CA', async () => {
    const f = fakeApi();
    const now = Date.now();
    const a = await ensureServingTls(f.api, { ...OPTS, now: () => now });
    const later = now + CERT_LIFETIME_MS - CERT_RENEW_MS + 86_400_000;
    const caKey = Buffer.from(f.secret()!.data['ca.key']!, 'base64').toString();
    expect(due({ 'tls.crt': a.cert, 'tls.key': a.key, 'ca.crt': a.caBundle, 'ca.key': caKey }, OPTS, later)).toEqual({ ca: false, cert: true });
    const b = await ensureServingTls(f.api, { ...OPTS, now: () => later });
    expect(b.cert).not.toBe(a.cert);
    expect(b.caBundle).toBe(a.caBundle);
  });

  it('renews the certificate when the Service names change', async () => {
    const f = fakeApi();
    const a = await ensureServingTls(f.api, OPTS);
    const b = await ensureServingTls(f.api, { ...OPTS, dnsNames: ['other'] });
    expect(new X509Certificate(b.cert).subjectAltName).toBe('DNS:other, IP Address:127.0.0.1');
    expect(b.caBundle).toBe(a.caBundle);
  });

  it('rotates the CA before it expires, trusting the old one beside the new until this replica has seen it so for RETIRE_MS', async () => {
    const f = fakeApi();
    const now = Date.now();
    let mono = 0;
    const seenFor = firstSeen(() => mono); // this replica's own monotonic clock, not the CA's dates
    const a = await ensureServingTls(f.api, { ...OPTS, now: () => now, seenFor });
    const later = now + CA_LIFETIME_MS - CA_RENEW_MS + 86_400_000;
    const b = await ensureServingTls(f.api, { ...OPTS, now: () => later, seenFor });
    const bundle = certsOf(b.caBundle);
    expect(bundle).toHaveLength(2);
    expect(bundle[1]!.trim()).toBe(a.caBundle.trim());
    expect(new X509Certificate(b.cert).verify(new X509Certificate(bundle[0]!).publicKey)).toBe(true);
    expect(await ensureServingTls(f.api, { ...OPTS, now: () => later + 4 * RETIRE_MS, seenFor })).toEqual(b); // first seen now: a wall clock an hour ahead changes nothing
    mono += RETIRE_MS - 1;
    expect(await ensureServingTls(f.api, { ...OPTS, now: () => later, seenFor })).toEqual(b); // still trusted
    mono += 1;
    const c = await ensureServingTls(f.api, { ...OPTS, now: () => later, seenFor });
    expect(certsOf(c.caBundle)).toEqual([bundle[0]]);
    expect([c.cert, c.key]).toEqual([b.cert, b.key]); // the pair served is not renewed for it
    expect(f.secret()!.metadata).not.toHaveProperty(['annotations', RETIRING_ANNOTATION]);
  });

  it('never drops the CA that signs the serving certificate, even listed by a hand-edited annotation', async () => {
    const f = fakeApi();
    const a = await ensureServingTls(f.api, OPTS);
    const other = await ensureServingTls(fakeApi().api, OPTS);
    const s = f.secret()!;
    s.data['ca.crt'] = Buffer.from(a.caBundle + other.caBundle + a.caBundle).toString('base64'); // the signer repeated further on, too
    const fp = (pem: string) => new X509Certificate(pem).fingerprint256;
    s.metadata.annotations = { [RETIRING_ANNOTATION]: `${fp(a.caBundle)},${fp(other.caBundle)}` };
    const b = await ensureServingTls(f.api, { ...OPTS, seenFor: () => RETIRE_MS });
    expect(b.caBundle).toBe(a.caBundle); // the listed other CA goes, the signer stays
    expect([b.cert, b.key]).toEqual([a.cert, a.key]);
  });

  it('never drops CAs it did not put beside a new one (a bundle made by hand), and keeps the Secret\'s own labels and annotations', async () => {
    const f = fakeApi();
    const a = await ensureServingTls(f.api, OPTS);
    const other = await ensureServingTls(fakeApi().api, OPTS);
    const s = f.secret()!;
    s.data['ca.crt'] = Buffer.from(a.caBundle + other.caBundle).toString('base64');
    Object.assign(s.metadata, { labels: { team: 'x' }, annotations: { 'gitops/managed': 'yes' } });
    const seenFor = () => 10 * RETIRE_MS;
    expect((await ensureServingTls(f.api, { ...OPTS, seenFor })).caBundle).toBe(a.caBundle + other.caBundle);
    const renewed = await ensureServingTls(f.api, { ...OPTS, dnsNames: ['other'], seenFor }); // a write for another reason
    expect(renewed.caBundle).toBe(a.caBundle + other.caBundle);
    expect(f.secret()!.metadata).toMatchObject({ labels: { team: 'x', 'app.kubernetes.io/name': 'ownerrefs-webhook' }, annotations: { 'gitops/managed': 'yes' } });
  });

  it('makes everything again when the Secret holds garbage', async () => {
    expect(due({ 'tls.crt': 'x', 'ca.crt': 'y', 'ca.key': 'z' }, OPTS, Date.now())).toEqual({ ca: true, cert: true });
  });
});

/** The Secret's data, decoded. */
const data = (f: ReturnType<typeof fakeApi>) => Object.fromEntries(Object.entries(f.secret()!.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
const otherKey = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

describe('self-managed TLS with a Secret that went wrong', () => {
  it.each<[string, (d: Record<string, string>) => Record<string, string>, { ca: boolean; cert: boolean }]>([
    ['a tls.key that is not the certificate\'s (every replica would fail to serve it)', (d) => ({ ...d, 'tls.key': otherKey() }), { ca: false, cert: true }],
    ['a tls.key that does not parse', (d) => ({ ...d, 'tls.key': 'garbage' }), { ca: false, cert: true }],
    ['a ca.key that is not the CA\'s (it would sign certificates nobody trusts)', (d) => ({ ...d, 'ca.key': otherKey() }), { ca: true, cert: true }],
    ['a ca.key that does not parse', (d) => ({ ...d, 'ca.key': 'garbage' }), { ca: true, cert: true }],
    ['the pair as written', (d) => d, { ca: false, cert: false }],
  ])('judges %s', async (_what, edit, verdict) => {
    const f = fakeApi();
    await ensureServingTls(f.api, OPTS);
    expect(due(edit(data(f)), OPTS, Date.now())).toEqual(verdict);
  });

  it('repairs a Secret whose keys are not its certificates\' into a pair that serves and is trusted, keeping the old CA in the bundle', async () => {
    const f = fakeApi();
    const a = await ensureServingTls(f.api, OPTS);
    const broken = { ...data(f), 'tls.key': otherKey(), 'ca.key': otherKey() };
    f.secret()!.data = Object.fromEntries(Object.entries(broken).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
    const b = await ensureServingTls(f.api, OPTS);
    const cert = new X509Certificate(b.cert);
    const bundle = b.caBundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!;
    expect(cert.checkPrivateKey((await import('node:crypto')).createPrivateKey(b.key))).toBe(true);
    expect(cert.verify(new X509Certificate(bundle[0]!).publicKey)).toBe(true);
    expect(bundle[1]!.trim()).toBe(a.caBundle.trim()); // the other replica's certificate is still trusted
  });

  it('does not renew a certificate with an IPv6 name on every check (Node prints it uncompressed)', async () => {
    const f = fakeApi();
    const opts = { ...OPTS, ipAddresses: ['::1', 'FD00::5'] };
    const a = await ensureServingTls(f.api, opts);
    expect(new X509Certificate(a.cert).subjectAltName).toContain('IP Address:0:0:0:0:0:0:0:1');
    expect(due(data(f), opts, Date.now())).toEqual({ ca: false, cert: false });
    expect(await ensureServingTls(f.api, opts)).toEqual(a);
  });

  it('renews a pair that is not valid yet (written by a replica whose clock runs fast)', async () => {
    const f = fakeApi();
    const now = Date.now();
    await ensureServingTls(f.api, { ...OPTS, now: () => now + 3 * 3_600_000 });
    expect(due(data(f), OPTS, now)).toEqual({ ca: true, cert: true });
  });

  it('keeps the type of a Secret made by hand (a Secret\'s type cannot change)', async () => {
    const f = fakeApi();
    await ensureServingTls(f.api, OPTS);
    const puts: unknown[] = [];
    const api: ApiClient = { ...f.api, json: <T>(m: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown) => {
      if (m === 'GET' && !path.includes('mutating')) return f.api.json<{ data: Record<string, string> }>(m, path).then((s) => ({ ...s, type: 'Opaque', data: { ...s.data, 'tls.key': '' } }) as T);
      if (m === 'PUT') puts.push(body);
      return f.api.json<T>(m, path, body);
    } };
    await ensureServingTls(api, OPTS);
    expect(puts).toMatchObject([{ type: 'Opaque' }]);
  });

  it('after the Secret was deleted, keeps trusting the CA the other replica still serves under, for RETIRE_MS', async () => {
    const f = fakeApi();
    let mono = 0;
    const opts = { ...OPTS, trusted: () => configuredCas(f.api, 'ownerrefs.dev'), seenFor: firstSeen(() => mono) };
    const a = await ensureServingTls(f.api, opts); // what the other replica goes on serving until its next check
    await syncCaBundle(f.api, 'ownerrefs.dev', a.caBundle);
    f.deleteSecret();
    const b = await ensureServingTls(f.api, opts);
    await syncCaBundle(f.api, 'ownerrefs.dev', b.caBundle);
    const served = (cert: string, bundle: string) => certsOf(bundle).some((ca) => new X509Certificate(cert).verify(new X509Certificate(ca).publicKey));
    const configured = () => Buffer.from(f.cfg().webhooks[0]!.clientConfig.caBundle!, 'base64').toString();
    expect(certsOf(b.caBundle)[0]).not.toBe(certsOf(a.caBundle)[0]); // a new CA
    expect([served(b.cert, configured()), served(a.cert, configured())]).toEqual([true, true]);
    await ensureServingTls(f.api, opts); // this replica sees the list of CAs to retire
    mono += RETIRE_MS;
    const c = await ensureServingTls(f.api, opts);
    await syncCaBundle(f.api, 'ownerrefs.dev', c.caBundle);
    expect([served(b.cert, configured()), served(a.cert, configured())]).toEqual([true, false]);
    expect(certsOf(configured())).toHaveLength(1);
  });

  it('keeps only valid CAs of the configuration\'s caBundle beside a new CA, and reads it only when it makes one', async () => {
    const f = fakeApi();
    const now = Date.now();
    const expired = await ensureServingTls(fakeApi().api, { ...OPTS, now: () => now - CA_LIFETIME_MS - 2 * 86_400_000 });
    const good = await ensureServingTls(fakeApi().api, OPTS);
    const reads: number[] = [];
    const trusted = async () => {
      reads.push(1);
      return ['not a certificate', expired.caBundle, good.cert, good.caBundle, good.caBundle].join('\n');
    };
    const b = await ensureServingTls(f.api, { ...OPTS, trusted });
    expect(certsOf(b.caBundle).slice(1)).toEqual(certsOf(good.caBundle)); // not the expired CA, the leaf, the garbage or a duplicate
    await ensureServingTls(f.api, { ...OPTS, trusted });
    expect(reads).toHaveLength(1);
  });

  it('reads no CA from a webhook configuration that does not exist', async () => {
    expect(await configuredCas(fakeApi().api, 'ownerrefs.dev')).toBe(''); // no caBundle yet
    const api: ApiClient = { json: () => Promise.reject(new ApiError(404, 'NotFound', 'gone')), stream: () => Promise.reject(new Error('no')) };
    expect(await configuredCas(api, 'ownerrefs.dev')).toBe('');
    const down: ApiClient = { json: () => Promise.reject(new ApiError(503, 'ServiceUnavailable', 'down')), stream: () => Promise.reject(new Error('no')) };
    await expect(configuredCas(down, 'ownerrefs.dev')).rejects.toThrow(/down/); // not a Secret made without them
  });

  it('patches the caBundle again when another replica patched between its read and its patch', async () => {
    const f = fakeApi();
    const t = await ensureServingTls(f.api, OPTS);
    let raced = false;
    const api: ApiClient = { ...f.api, json: async <T>(m: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown, ct?: string) => {
      const got = await f.api.json<T>(m, path, body, ct);
      if (m === 'GET' && path.includes('mutating') && !raced) { // the other replica's patch lands now
        raced = true;
        await f.api.json('PATCH', path, [{ op: 'test', path: '/metadata/resourceVersion', value: f.cfg().metadata.resourceVersion },
          { op: 'add', path: '/webhooks/0/clientConfig/caBundle', value: 'b3RoZXI=' }], 'application/json-patch+json');
      }
      return got;
    } };
    expect(await syncCaBundle(api, 'ownerrefs.dev', t.caBundle)).toBe(2);
    expect(f.cfg().webhooks.map((w) => Buffer.from(w.clientConfig.caBundle!, 'base64').toString())).toEqual([t.caBundle, t.caBundle]);
  });
});

describe('webhook readiness (notServable)', () => {
  const validity = { from: 1_000, to: 2_000 };
  it.each<[string, { from: number; to: number } | undefined, number, RegExp | undefined]>([
    ['ready while the certificate served is valid, whatever the last refresh did', validity, 1_500, undefined],
    ['not ready before it is valid', validity, 500, /not valid before/],
    ['not ready once it expired', validity, 2_000, /expired at/],
    ['not ready without a readable certificate', undefined, 1_500, /no readable serving certificate/],
  ])('%s', (_what, v, now, why) => {
    const got = notServable(v, now);
    if (why) expect(got).toEqual([expect.stringMatching(why)]);
    else expect(got).toEqual([]);
  });
});
