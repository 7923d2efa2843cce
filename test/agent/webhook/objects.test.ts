import { describe, expect, it } from 'vitest';
import { renderOwnerReferencesJson } from '../../../projections/ownerreferences.ts';
import { MAX_PATCH_BYTES, mutate, POD_SPEC_PATHS } from '../../../agent/webhook/objects.ts';
import { applyPatch } from '../../../agent/webhook/patch.ts';
import { mentionsOwnerReferences, TEMPLATE_ENV_ANNOTATION, TEMPLATE_ENV_FIELD } from '../../../agent/webhook/podspec.ts';
import { KEP_OWNERS, owner } from '../../support/fixtures.ts';
import { kepEnv, kepPod, kepSpec, kepVolume, OWNERS_FIELD, workload, WORKLOAD_KINDS } from '../../support/podspecs.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function mutated(kind: string, obj: unknown): Obj {
  const m = mutate(kind, obj);
  if (!m.allowed) throw new Error(`denied: ${m.message}`);
  return applyPatch(obj as Obj, m.patch);
}

function denial(kind: string, obj: unknown): string {
  const m = mutate(kind, obj);
  if (m.allowed) throw new Error('allowed');
  return m.message;
}

function specOf(kind: string, obj: Obj): Obj {
  return POD_SPEC_PATHS[kind]!.reduce((o: Obj, k) => o[k], obj);
}

describe('a Pod in KEP-4753 syntax', () => {
  it('gets its env as the literal KEP JSON of its own owners, in every kind of container', () => {
    const pod = mutated('Pod', kepPod(kepSpec({ init: true, ephemeral: true }), [KEP_OWNERS[0]!]));
    const want = renderOwnerReferencesJson([KEP_OWNERS[0]!]);
    for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
      expect(pod.spec[list][0].env).toEqual([{ name: 'PLAIN', value: 'x' }, { name: 'OWNER_REFERENCES', value: want }]);
    }
  });

  it('gets "items":[] in env when it has no owners', () => {
    const pod = mutated('Pod', kepPod(kepSpec(), []));
    expect(pod.spec.containers[0].env[1].value).toBe('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}');
  });

  it('gets the downwardAPI volume as a read-only ownerrefs.dev CSI volume carrying every item, other volumes untouched', () => {
    const items = [{ path: 'labels', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.labels' } }, { path: 'cpu/limit', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' }, mode: 0o600 }];
    const pod = mutated('Pod', kepPod(kepSpec({ env: false, volumes: [{ name: 'scratch', emptyDir: {} }, kepVolume('podinfo', items, 0o640)] })));
    expect(pod.spec.volumes[0]).toEqual({ name: 'scratch', emptyDir: {} });
    expect(pod.spec.volumes[1]).toEqual({ name: 'podinfo', csi: { driver: 'ownerrefs.dev', readOnly: true, volumeAttributes: { downwardAPI: expect.any(String) } } });
    expect(JSON.parse(pod.spec.volumes[1].csi.volumeAttributes.downwardAPI)).toEqual(kepVolume('podinfo', items, 0o640).downwardAPI);
  });

  it('gets a projected volume of downwardAPI sources only as one CSI volume, items in order, the projected defaultMode kept', () => {
    const v = { name: 'podinfo', projected: { defaultMode: 0o400, sources: [
      { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
      { downwardAPI: { items: [{ path: 'ownerReferences', fieldRef: { fieldPath: OWNERS_FIELD } }] } },
    ] } };
    const pod = mutated('Pod', kepPod(kepSpec({ env: false, volumes: [v] })));
    expect(JSON.parse(pod.spec.volumes[0].csi.volumeAttributes.downwardAPI)).toEqual({
      items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }, { path: 'ownerReferences', fieldRef: { fieldPath: OWNERS_FIELD } }], defaultMode: 0o400,
    });
  });

  it('moves a volume that names only fields beyond the KEP (the workload, the Node) to the agent too', () => {
    const v = { name: 'podinfo', downwardAPI: { items: [{ path: 'workload', fieldRef: { fieldPath: 'ownerrefs.dev/workloadOwnerReferences' } }, { path: 'node', fieldRef: { fieldPath: 'ownerrefs.dev/nodeOwnerReferences' } }] } };
    const out = mutated('Deployment', workload('Deployment', kepSpec({ env: false, volumes: [v] })));
    expect(JSON.parse(out.spec.template.spec.volumes[0].csi.volumeAttributes.downwardAPI)).toEqual(v.downwardAPI);
  });

  it('resolves a template\'s encoded env to the literal (a pod made from a rewritten template)', () => {
    const spec = { containers: [{ name: 'app', env: [{ name: 'O', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: TEMPLATE_ENV_FIELD } } }] }] };
    const pod = mutated('Pod', kepPod(spec as never, [owner({ kind: 'ReplicaSet', name: 'web-5d8f' })]));
    expect(pod.spec.containers[0].env[0]).toEqual({ name: 'O', value: renderOwnerReferencesJson([owner({ kind: 'ReplicaSet', name: 'web-5d8f' })]) });
  });

  it('is left alone when it does not use the syntax (no patch at all)', () => {
    const plain = kepPod({ containers: [{ name: 'app', env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }], volumes: [{ name: 'd', downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }] } as never);
    expect(mutate('Pod', plain)).toEqual({ allowed: true, patch: [], changed: [], warnings: [] });
  });

  it('warns about two owners with controller: true (the API server refuses such a pod)', () => {
    const m = mutate('Pod', kepPod(kepSpec(), KEP_OWNERS));
    expect(m.allowed && m.warnings).toEqual([expect.stringMatching(/more than one owner with controller: true/)]);
  });

  it('is idempotent: the webhook called again on its own output changes nothing', () => {
    const once = mutated('Pod', kepPod(kepSpec({ init: true })));
    expect(mentionsOwnerReferences(once.spec)).toBe(false);
    expect(mutate('Pod', once)).toMatchObject({ allowed: true, patch: [] });
  });
});

describe('pod templates', () => {
  it.each(WORKLOAD_KINDS)('%s: volumes become CSI volumes, env an annotation-backed fieldRef the API server accepts', (kind) => {
    const out = mutated(kind, workload(kind, kepSpec()));
    const spec = specOf(kind, out);
    expect(spec.volumes[1].csi.driver).toBe('ownerrefs.dev');
    expect(spec.containers[0].env[1]).toEqual({ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${TEMPLATE_ENV_ANNOTATION}']` } } });
    expect(mutate(kind, out)).toMatchObject({ allowed: true, patch: [] }); // idempotent: no rollout on re-apply
  });

  it('is deterministic: the same manifest gives the same template (no spurious rollout)', () => {
    expect(mutated('Deployment', workload('Deployment', kepSpec()))).toEqual(mutated('Deployment', workload('Deployment', kepSpec())));
  });

  it('replaces its own csi source that a server-side re-apply merged beside the downwardAPI one', () => {
    const once = mutated('Deployment', workload('Deployment', kepSpec()));
    const merged = structuredClone(once);
    merged.spec.template.spec.volumes[1].downwardAPI = kepVolume().downwardAPI; // what SSA of the manifest leaves
    expect(mutated('Deployment', merged)).toEqual(once);
    merged.spec.template.spec.volumes[1].csi.driver = 'other.dev';
    expect(denial('Deployment', merged)).toMatch(/exactly one source; csi cannot be kept/);
  });

  it('leaves kinds without a pod template alone', () => {
    expect(mutate('ConfigMap', { data: { a: OWNERS_FIELD } })).toEqual({ allowed: true, patch: [], changed: [], warnings: [] });
  });
});

describe('refusals say what to write instead, and nothing is dropped silently', () => {
  const cases: { name: string; volumes?: unknown[]; env?: unknown; error: RegExp }[] = [
    { name: 'a projected volume mixing the owners with a secret', error: /mixes metadata.ownerReferences with secret.*Move the metadata.ownerReferences item into a volume of its own/,
      volumes: [{ name: 'v', projected: { sources: [{ secret: { name: 's' } }, { downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: OWNERS_FIELD } }] } }] } }] },
    { name: 'a projected volume mixing the owners with a token', error: /serviceAccountToken/,
      volumes: [{ name: 'v', projected: { sources: [{ serviceAccountToken: { path: 't' } }, { downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: OWNERS_FIELD } }] } }] } }] },
    { name: 'an item path that climbs out', error: /spec\.volumes\[0\]\.downwardAPI\.items\[1\]\.path: must not contain '\.\.'/, volumes: [kepVolume('podinfo', [{ path: 'a/../../etc', fieldRef: { fieldPath: 'metadata.name' } }])] },
    { name: 'an absolute item path', error: /must be a relative path/, volumes: [kepVolume('podinfo', [{ path: '/etc/passwd', fieldRef: { fieldPath: 'metadata.name' } }])] },
    { name: 'a field the volume cannot carry', error: /status.podIP.*not supported/, volumes: [kepVolume('podinfo', [{ path: 'ip', fieldRef: { fieldPath: 'status.podIP' } }])] },
    { name: 'a resource of a container the pod lacks', error: /no container "ghost"/, volumes: [kepVolume('podinfo', [{ path: 'c', resourceFieldRef: { containerName: 'ghost', resource: 'limits.cpu' } }])] },
    { name: 'an unknown field in the source', error: /unknown field/, volumes: [{ name: 'v', downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: OWNERS_FIELD } }], extra: 1 } }] },
    { name: 'an item name reserved for the agent', error: /reserved/, volumes: [kepVolume('podinfo', [{ path: '.ownerrefs-tmp.x', fieldRef: { fieldPath: 'metadata.name' } }])] },
    { name: 'a volume with the owners in downwardAPI and a projected source beside it (the projected one would be dropped)', error: /exactly one source; projected cannot be kept/,
      volumes: [{ ...kepVolume('podinfo'), projected: { sources: [{ secret: { name: 's' } }] } }] },
    { name: 'a volume with the owners in projected and a downwardAPI source beside it (that one would be dropped)', error: /exactly one source; downwardAPI cannot be kept/,
      volumes: [{ name: 'v', projected: { sources: [{ downwardAPI: { items: [{ path: 'o', fieldRef: { fieldPath: OWNERS_FIELD } }] } }] }, downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }] },
    { name: 'a projected volume whose sources give one path twice (the API server\'s conflicting duplicate paths)', error: /projected: conflicting duplicate paths: info is given by more than one item/,
      volumes: [{ name: 'v', projected: { sources: [{ downwardAPI: { items: [{ path: 'info', fieldRef: { fieldPath: OWNERS_FIELD } }] } },
        { downwardAPI: { items: [{ path: 'info', fieldRef: { fieldPath: 'metadata.name' } }] } }] } }] },
    { name: 'env with apiVersion v2', error: /only "v1"/, env: { name: 'O', valueFrom: { fieldRef: { apiVersion: 'v2', fieldPath: OWNERS_FIELD } } } },
    { name: 'env with both value and valueFrom', error: /cannot be combined with value/, env: { ...kepEnv(), value: 'x' } },
  ];

  it.each(cases)('$name', ({ volumes, env, error }) => {
    const spec = { containers: [{ name: 'app', ...(env ? { env: [env] } : {}) }], ...(volumes ? { volumes } : {}) };
    expect(denial('Pod', kepPod(spec as never))).toMatch(error);
    expect(denial('Deployment', workload('Deployment', spec))).toMatch(/Deployment kep-deployment/);
  });

  // From the API server they are always well typed; an offline manifest (inject) may hold anything.
  it("refuses a Pod's ownerReferences that Kubernetes would not decode, naming each field, rather than rendering an owner of empty strings", () => {
    const pod = { ...kepPod(kepSpec()), metadata: { name: 'p', ownerReferences: [null, 5, { apiVersion: 'v1', kind: 'K', uid: 'u', name: 7, controller: 'yes' }] } };
    expect(denial('Pod', pod)).toBe('ownerrefs.dev cannot serve metadata.ownerReferences for Pod p: metadata.ownerReferences[0]: not an object; ' +
      'metadata.ownerReferences[1]: not an object; metadata.ownerReferences[2].name: not a string; ' +
      'metadata.ownerReferences[2].controller: not a boolean (true or false, not quoted)');
    const empty = { ...kepPod(kepSpec()), metadata: { name: 'p', ownerReferences: [{ apiVersion: 'v1', kind: 'K', name: 'n' }] } };
    expect(denial('Pod', empty)).toMatch(/: metadata\.ownerReferences\[0\]\.uid: missing \(Kubernetes requires apiVersion, kind, name and uid\)$/);
  });

  it('escapes controls in a denial: it quotes the manifest\'s own keys, and kubectl prints it as it is', () => {
    const spec = kepSpec() as { containers: { env?: unknown[] }[] };
    spec.containers[0]!.env = [{ name: 'E', valueFrom: { fieldRef: { fieldPath: OWNERS_FIELD }, 'k\x1b[2J\u009b1m\u202e': {} } }];
    const m = denial('Pod', kepPod(spec as never));
    expect(m).toMatch(/cannot be combined with "k\\u001b\[2J\\u009b1m\\u202e"/);
    expect(m).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
  });

  it('quotes a name that could not be a Kubernetes name, controls escaped (mutation runs before validation)', () => {
    const pod = { ...kepPod(kepSpec()), metadata: { name: 'p\n\x1b[31m', ownerReferences: 'x' } };
    expect(denial('Pod', pod)).toMatch(/^ownerrefs.dev cannot serve metadata.ownerReferences for Pod "p\\n\\u001b\[31m": metadata.ownerReferences: not a list$/);
  });

  // Each KEP env entry of a Pod gets every owner as its value: owners x entries is bounded.
  it('refuses a rewrite larger than MAX_PATCH_BYTES instead of building it, and allows one just under it', () => {
    const owners = (n: number) => Array.from({ length: n }, (_, i) => ({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `rs-${i}`, uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}` }));
    const spec = (entries: number) => ({ containers: [{ name: 'app', env: Array.from({ length: entries }, (_, i) => kepEnv(`O${i}`)) }] });
    const perEntry = renderOwnerReferencesJson(owners(2_000)).length;
    const fits = Math.floor(MAX_PATCH_BYTES / (perEntry + 64));
    expect(mutate('Pod', kepPod(spec(fits) as never, owners(2_000))).allowed).toBe(true);
    expect(denial('Pod', kepPod(spec(200) as never, owners(2_000))))
      .toMatch(/the rewrite would add more than \d+ bytes to the object, over the webhook's limit of 524288 \(each of its 200 env entries with fieldRef metadata.ownerReferences gets all 2000 owners as its value: use fewer such entries, or a volume\)$/);
  });

  it('counts bytes, not characters, and says it is the volumes when their items make the rewrite too large, not env entries it does not have', () => {
    const items = [{ path: 'o', fieldRef: { fieldPath: OWNERS_FIELD } }, ...Array.from({ length: 127 }, (_, i) => ({ path: `${Array(15).fill('é'.repeat(120)).join('/')}/${i}`, fieldRef: { fieldPath: 'metadata.name' } }))];
    const volumes = [{ name: 'v', downwardAPI: { items } }, { name: 'w', downwardAPI: { items } }]; // about 475,000 characters, twice as many bytes
    expect(denial('Pod', kepPod({ containers: [{ name: 'app' }], volumes } as never)))
      .toMatch(/over the webhook's limit of 524288 \(its volumes' items are that large: use fewer or shorter items\)$/);
  });

  it('names at most five problems and counts the rest', () => {
    const items = Array.from({ length: 8 }, (_, i) => ({ path: `/abs${i}`, fieldRef: { fieldPath: 'metadata.name' } }));
    expect(denial('Pod', kepPod({ containers: [{ name: 'app' }], volumes: [kepVolume('podinfo', items)] } as never))).toMatch(/\(and 3 more\)$/);
  });
});

describe('hostile shapes never throw', () => {
  const shapes: unknown[] = [null, 42, 'pod', [], { spec: null }, { spec: { containers: 'x' } }, { spec: { containers: [null, 1, { env: 'x' }, { env: [null, { valueFrom: 1 }, { valueFrom: { fieldRef: 'x' } }] }] } },
    { spec: { volumes: [null, { downwardAPI: null }, { downwardAPI: { items: 'x' } }, { projected: { sources: [null, 1] } }] } },
    { metadata: { ownerReferences: 'x' }, spec: kepSpec() }, { metadata: { ownerReferences: [null, 5, { name: 7, controller: 'yes' }] }, spec: kepSpec() }, { spec: { volumes: [{ name: 'v', downwardAPI: { items: [{ fieldRef: { fieldPath: OWNERS_FIELD } }, 7] } }] } }];
  it.each(shapes.map((s, i) => [i, s] as const))('shape %i', (_i, s) => {
    for (const kind of ['Pod', 'Deployment', 'CronJob', 'PodTemplate']) expect(() => mutate(kind, s)).not.toThrow();
  });
});
