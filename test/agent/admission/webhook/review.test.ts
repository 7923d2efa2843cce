import { describe, expect, it } from 'vitest';
import { admit, plan, parseReview, responseFor, ReviewError } from '../../../../agent/admission/webhook/review.ts';
import { kepPod, kepSpec, workload } from '../../../support/podspecs.ts';

const review = (request: unknown) => JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request });
const req = (over: Record<string, unknown> = {}) => ({ uid: 'u-1', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object: kepPod(), ...over });

describe('parseReview refuses what is not an AdmissionReview, saying why', () => {
  const bad: { name: string; body: string; error: RegExp; uid?: string }[] = [
    { name: 'not JSON', body: '{"apiVersion":', error: /not JSON/ },
    { name: 'a JSON array', body: '[]', error: /not a JSON object/ },
    { name: 'another kind', body: JSON.stringify({ apiVersion: 'v1', kind: 'Pod' }), error: /expected apiVersion admission.k8s.io\/v1/ },
    { name: 'v1beta1', body: JSON.stringify({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request: req() }), error: /expected apiVersion/ },
    { name: 'no request', body: JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), error: /no request/ },
    { name: 'no uid', body: review(req({ uid: undefined })), error: /request.uid/ },
    { name: 'a huge uid', body: review(req({ uid: 'x'.repeat(500) })), error: /request.uid/ },
    { name: 'a uid that is a number', body: review(req({ uid: 7 })), error: /request.uid/ },
    { name: 'no kind', body: review(req({ kind: 'Pod' })), error: /request.kind/, uid: 'u-1' },
    { name: 'no operation', body: review(req({ operation: null })), error: /operation/, uid: 'u-1' },
  ];
  it.each(bad)('$name', ({ body, error, uid }) => {
    let caught: unknown;
    try {
      parseReview(body);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ReviewError);
    expect((caught as ReviewError).message).toMatch(error);
    expect((caught as ReviewError).uid).toBe(uid);
  });
});

describe('admit', () => {
  it('mutates a Pod CREATE and answers with a base64 JSON Patch', () => {
    const r = responseFor('u-1', admit(plan(parseReview(review(req())))));
    expect(r).toMatchObject({ uid: 'u-1', allowed: true, patchType: 'JSONPatch' });
    const ops = JSON.parse(Buffer.from(r.patch!, 'base64').toString('utf8')) as { path: string }[];
    expect(ops.map((o) => o.path)).toEqual(['/spec/containers/0/env/1/valueFrom/fieldRef/fieldPath', '/spec/volumes/1/downwardAPI/items/0/fieldRef/fieldPath', '/metadata/annotations']);
  });

  it('mutates an ephemeral-containers UPDATE (the subresource sends the Pod), leaving the annotation to the agent (the subresource changes nothing else)', () => {
    const pod = kepPod({ containers: [{ name: 'app' }], ephemeralContainers: [{ name: 'dbg', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } }] }] } as never);
    const m = admit(plan(parseReview(review(req({ operation: 'UPDATE', subResource: 'ephemeralcontainers', object: pod })))));
    expect(m.allowed && m.patch.map((p) => p.path)).toEqual(['/spec/ephemeralContainers/0/env/0/valueFrom/fieldRef/fieldPath']);
  });

  it('touches only the ephemeral containers in that UPDATE, which may change nothing else (a stored pod left in KEP syntax)', () => {
    const kep = { name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } };
    const pod = kepPod({ containers: [{ name: 'app', env: [kep] }], volumes: [{ name: 'v', downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: 'metadata.ownerReferences' } }] } }],
      ephemeralContainers: [{ name: 'dbg', env: [kep] }] } as never);
    const m = admit(plan(parseReview(review(req({ operation: 'UPDATE', subResource: 'ephemeralcontainers', object: pod })))));
    expect(m.allowed && m.patch.map((p) => p.path)).toEqual(['/spec/ephemeralContainers/0/env/0/valueFrom/fieldRef/fieldPath']);
  });

  it('leaves the ephemeral containers the pod already has as they are (the API server forbids changing them), rewriting the one added', () => {
    const kep = { name: 'O', valueFrom: { fieldRef: { fieldPath: 'metadata.ownerReferences' } } };
    const before = kepPod({ containers: [{ name: 'app' }], ephemeralContainers: [{ name: 'old', env: [kep] }] } as never);
    const after = kepPod({ containers: [{ name: 'app' }], ephemeralContainers: [{ name: 'old', env: [kep] }, { name: 'new', env: [kep] }] } as never);
    const m = admit(plan(parseReview(review(req({ operation: 'UPDATE', subResource: 'ephemeralcontainers', object: after, oldObject: before })))));
    expect(m.allowed && m.patch.map((p) => p.path)).toEqual(['/spec/ephemeralContainers/1/env/0/valueFrom/fieldRef/fieldPath']);
  });

  it('denies with the reason, as a 422 the API server shows', () => {
    const pod = kepPod(undefined, [{ apiVersion: 'v1', kind: 'X', name: 'n' } as never]);
    expect(responseFor('u-1', admit(plan(parseReview(review(req({ object: pod }))))))).toMatchObject({ allowed: false, status: { code: 422, message: expect.stringMatching(/ownerReferences\[0\]\.uid: missing/) } });
  });

  it('refuses a CREATE or UPDATE of a served kind without its object as malformed', () => {
    for (const [r, what] of [[req({ object: undefined }), 'missing'], [req({ object: null }), 'null'], [req({ operation: 'UPDATE', object: [] }), 'a list']] as const) {
      const thrown = (() => { try { admit(plan(parseReview(review(r)))); } catch (err) { return err; } })();
      expect(thrown).toBeInstanceOf(ReviewError);
      expect(thrown).toMatchObject({ uid: 'u-1', message: `request.object is ${what}: a ${r.operation} of a Pod carries the object` });
    }
  });

  it('leaves DELETE, unknown groups and kinds alone', () => {
    for (const r of [req({ operation: 'DELETE' }), req({ kind: { group: 'example.com', version: 'v1', kind: 'Pod' } }),
      req({ kind: { group: '', version: 'v1', kind: 'ConfigMap' } })]) {
      expect(admit(plan(parseReview(review(r))))).toEqual({ allowed: true, patch: [], changed: [], annotations: [], warnings: [] });
    }
  });

  it('serves every workload kind in its own API group', () => {
    const groups: Record<string, string> = { Deployment: 'apps', CronJob: 'batch', ReplicationController: '', PodTemplate: '' };
    for (const [kind, group] of Object.entries(groups)) {
      const m = admit(plan(parseReview(review(req({ kind: { group, version: 'v1', kind }, object: workload(kind, kepSpec()) })))));
      expect(m.allowed && m.patch.length).toBe(2); // the env and the volume item
    }
  });
});

describe('a Pod that reads its workload', () => {
  const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'rs-1', controller: true };
  const reads = (...keys: string[]) => ({ containers: [{ name: 'app', env: keys.map((k, i) => ({ name: `E${i}`, valueFrom: { fieldRef: { fieldPath: `metadata.annotations['ownerrefs.dev/${k}']` } } })) }] });
  const pod = (meta: Record<string, unknown>, spec: unknown = reads('workload-uid', 'controller-uid')) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', ownerReferences: [rs], ...meta }, spec });

  it('gets its annotations at CREATE only: an UPDATE never writes admission\'s values over the agent\'s', () => {
    const stored = pod({ namespace: 'ns', annotations: { 'ownerrefs.dev/workload-uid': 'd-1', 'ownerrefs.dev/controller-uid': 'rs-1' } });
    expect(admit(plan(parseReview(review(req({ operation: 'UPDATE', namespace: 'ns', object: stored })))))).toEqual({ allowed: true, patch: [], changed: [], annotations: [], warnings: [] });
    const created = admit(plan(parseReview(review(req({ namespace: 'ns', object: pod({ namespace: 'ns' }) })))));
    expect(created.allowed && created.patch).toEqual([{ op: 'add', path: '/metadata/annotations', value: { 'ownerrefs.dev/workload-uid': '(unresolved: Pending)', 'ownerrefs.dev/controller-uid': 'rs-1' } }]);
  });

  it('still has KEP syntax rewritten in an UPDATE, as a template has, with no annotation set', () => {
    const kep = pod({ namespace: 'ns' }, { containers: [{ name: 'app', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: 'ownerrefs.dev/workloadOwnerReferences' } } }] }] });
    const m = admit(plan(parseReview(review(req({ operation: 'UPDATE', namespace: 'ns', object: kep })))));
    expect(m.allowed && m.patch).toEqual([{ op: 'replace', path: '/spec/containers/0/env/0/valueFrom/fieldRef/fieldPath', value: "metadata.annotations['ownerrefs.dev/workload-owner-references']" }]);
  });

  it.each([
    { what: 'another namespace', meta: { namespace: 'victim' } },
    { what: 'none', meta: {} },
  ])('has its owners read in the request\'s namespace, whatever its metadata.namespace says ($what)', ({ meta }) => {
    const r = parseReview(review(req({ namespace: 'team-a', object: pod(meta) })));
    expect(plan(r)).toMatchObject({ act: 'mutate', chain: { namespace: 'team-a', owners: [rs] } });
    const asked: string[] = [];
    admit(plan(r), { chain: (ns) => { asked.push(ns); return { items: [rs], end: { reason: 'Top', message: '' } }; } });
    expect(asked).toEqual(['team-a']);
  });

  it('answers env that reads the Node\'s annotation with an admission warning to read it from a volume (kubectl prints it)', () => {
    const r = responseFor('u-1', admit(plan(parseReview(review(req({ namespace: 'ns', object: pod({ namespace: 'ns' }, reads('node-owner-references')) }))))));
    expect(r).toMatchObject({ allowed: true, warnings: [expect.stringMatching(/^env app\/E0 reads ownerrefs.dev\/node-owner-references, which is set only after the pod is bound to a node.*read it from a downwardAPI volume instead$/)] });
  });

  it('has no owners read without a request namespace (an API server always sends one for a Pod)', () => {
    expect(plan(parseReview(review(req({ object: pod({ namespace: 'victim' }) }))))).not.toHaveProperty('chain');
  });
});
