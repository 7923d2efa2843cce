import { describe, expect, it } from 'vitest';

import { renderOwnerReferencesJson } from '../../../../projections/ownerreferences.ts';
import { MAX_ANNOTATION_BYTES, mutate } from '../../../../agent/admission/webhook/objects.ts';
import { workloadKindNamed } from '../../../../projections/workloadkinds.ts';
import { applyPatch } from '../../../../agent/cli/patch.ts';
import { KEP_OWNERS, owner } from '../../../support/fixtures.ts';
import { kepEnv, kepPod, kepSpec, kepVolume, OWNERS_FIELD, workload, WORKLOAD_KINDS } from '../../../support/podspecs.ts';
import { ANNOTATION_KEYS } from '../../../../projections/names.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const OWNERS_ANNOTATION = 'ownerrefs.dev/owner-references';
const READS_OWNERS = `metadata.annotations['${OWNERS_ANNOTATION}']`;

function mutated(kind: string, obj: unknown): Obj {
  const m = mutate(kind, obj);
  if (!m.allowed) throw new Error(`denied: ${m.message}`);
  return applyPatch(obj as Obj, m.patch);
}

function specOf(kind: string, obj: Obj): Obj {
  return workloadKindNamed(kind)!.podSpec.reduce((o: Obj, k) => o[k], obj);
}

const projected = (sources: unknown[]) => ({ name: 'podinfo', projected: { defaultMode: 0o440, sources } });

describe('a Pod in KEP-4753 syntax', () => {
  it('has each fieldRef pointed at the owners annotation, in every kind of container and volume, and nothing else changed', () => {
    const spec = kepSpec({ init: true, ephemeral: true, volumes: [{ name: 'scratch', emptyDir: {} }, kepVolume('podinfo', [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }], 0o440),
      projected([{ serviceAccountToken: { path: 'token' } }, { configMap: { name: 'c' } }, { downwardAPI: { items: [{ path: 'owners', fieldRef: { apiVersion: 'v1', fieldPath: OWNERS_FIELD } }] } }])] });
    const pod = mutated('Pod', kepPod(spec));
    const rewritten = structuredClone(spec) as Obj;
    for (const list of ['containers', 'initContainers', 'ephemeralContainers']) rewritten[list][0].env[1].valueFrom.fieldRef.fieldPath = READS_OWNERS;
    rewritten.volumes[1].downwardAPI.items[0].fieldRef.fieldPath = READS_OWNERS;
    rewritten.volumes[2].projected.sources[2].downwardAPI.items[0].fieldRef.fieldPath = READS_OWNERS;
    expect(pod.spec).toEqual(rewritten);
  });

  it('gets the owners annotation, the KEP document of its own owners, set over whatever the author wrote there', () => {
    const obj = kepPod(kepSpec(), [KEP_OWNERS[0]!]) as Obj;
    obj.metadata.annotations = { keep: 'me', [OWNERS_ANNOTATION]: 'forged' };
    const pod = mutated('Pod', obj);
    expect(pod.metadata.annotations).toEqual({ keep: 'me', [OWNERS_ANNOTATION]: renderOwnerReferencesJson([KEP_OWNERS[0]!]) });
  });

  it('gets "items":[] when it has no owners', () => {
    expect(mutated('Pod', kepPod(kepSpec(), [])).metadata.annotations[OWNERS_ANNOTATION]).toBe('{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}');
  });

  it('carries only the annotations its spec reads: the extension fields get their own, the Node\'s is left to the agent', () => {
    const items = [
      { path: 'chain', fieldRef: { fieldPath: 'ownerrefs.dev/controllerChain' } },
      { path: 'node', fieldRef: { fieldPath: 'ownerrefs.dev/nodeOwnerReferences' } },
    ];
    const pod = mutated('Pod', kepPod(kepSpec({ env: false, volumes: [{ name: 'v', downwardAPI: { items } }] }), [KEP_OWNERS[0]!]));
    expect(pod.spec.volumes[0].downwardAPI.items.map((i: Obj) => i.fieldRef.fieldPath)).toEqual([
      "metadata.annotations['ownerrefs.dev/controller-chain']", "metadata.annotations['ownerrefs.dev/node-owner-references']"]);
    expect(Object.keys(pod.metadata.annotations)).toEqual(['ownerrefs.dev/controller-chain']);
    expect(JSON.parse(pod.metadata.annotations['ownerrefs.dev/controller-chain'])).toMatchObject({ kind: 'ControllerChain', items: [{ uid: KEP_OWNERS[0]!.uid }], end: { reason: 'Pending' } });
  });

  it('made from a template (which reads the annotation already) gets its annotation set, with no other change', () => {
    const spec = { containers: [{ name: 'app', env: [{ name: 'O', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: READS_OWNERS } } }] }] };
    const m = mutate('Pod', kepPod(spec as never, [KEP_OWNERS[0]!]));
    expect(m.allowed && m.patch).toEqual([{ op: 'add', path: '/metadata/annotations', value: { [OWNERS_ANNOTATION]: renderOwnerReferencesJson([KEP_OWNERS[0]!]) } }]);
  });

  it('is left alone when it neither uses the syntax nor reads our annotations', () => {
    const spec = { containers: [{ name: 'app', env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }], volumes: [{ name: 'v', downwardAPI: { items: [{ path: 'a', fieldRef: { fieldPath: "metadata.annotations['other.io/x']" } }] } }] };
    expect(mutate('Pod', kepPod(spec as never))).toEqual({ allowed: true, patch: [], changed: [], annotations: [], warnings: [] });
  });

  it('warns about a read of an ownerrefs.dev annotation that does not exist (a typo), and admits it', () => {
    const spec = { containers: [{ name: 'app', env: [kepEnv(), { name: 'T', valueFrom: { fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/owner-refrences']" } } }] }] };
    const m = mutate('Pod', kepPod(spec as never));
    expect(m.allowed && m.warnings).toEqual([expect.stringMatching(/^env app\/T reads the annotation ownerrefs.dev\/owner-refrences, which ownerrefs.dev does not set/)]);
  });

  it('names every annotation ownerrefs.dev sets in that warning, and calls a read of none of them a typo', () => {
    const env = (name: string, key: string) => ({ name, valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${key}']` } } });
    const spec = { containers: [{ name: 'app', env: [env('T', 'ownerrefs.dev/workload-nme'), ...ANNOTATION_KEYS.filter((k) => k !== 'ownerrefs.dev/node-owner-references').map((k, i) => env(`K${i}`, k))] }] };
    const m = mutate('Pod', kepPod(spec as never));
    expect(m.allowed && m.warnings).toEqual(['env app/T reads the annotation ownerrefs.dev/workload-nme, which ownerrefs.dev does not set: did you mean ownerrefs.dev/workload-name?']);
    expect(ANNOTATION_KEYS).toHaveLength(11);
  });

  it('warns that env reading the Node\'s annotation is most often empty (it is set once the pod is bound), by either field path, and not a volume', () => {
    const env = (name: string, fieldPath: string) => ({ name, valueFrom: { fieldRef: { fieldPath } } });
    const spec = {
      initContainers: [{ name: 'init', env: [env('NODE', 'ownerrefs.dev/nodeOwnerReferences')] }],
      containers: [{ name: 'app', env: [env('NODE', "metadata.annotations['ownerrefs.dev/node-owner-references']"), env('OWNERS', 'metadata.ownerReferences')] }],
      volumes: [{ name: 'podinfo', downwardAPI: { items: [{ path: 'node', fieldRef: { fieldPath: 'ownerrefs.dev/nodeOwnerReferences' } }] } }],
    };
    const said = (where: string) => `${where} reads ownerrefs.dev/node-owner-references, which is set only after the pod is bound to a node, so env most often gets it empty: read it from a downwardAPI volume instead`;
    const m = mutate('Pod', kepPod(spec as never));
    expect(m.allowed && m.warnings).toEqual([said('env app/NODE'), said('env init/NODE')]);
    const d = mutate('Deployment', workload('Deployment', spec));
    expect(d.allowed && d.warnings).toEqual([said('env app/NODE'), said('env init/NODE')]);
    // kubectl debug's container starts on a bound pod: its env gets the value.
    const dbg = mutate('Pod', kepPod({ containers: [{ name: 'app' }], ephemeralContainers: [{ name: 'dbg', env: [env('NODE', 'ownerrefs.dev/nodeOwnerReferences')] }] } as never), { ephemeralOnly: { existing: new Set() } });
    expect(dbg.allowed && dbg.warnings).toEqual([]);
  });

  it('warns that OTEL_RESOURCE_ATTRIBUTES read through valueFrom breaks beside an injector that extends its value, and not the composed form', () => {
    const otel = "metadata.annotations['ownerrefs.dev/otel-resource-attributes']";
    const direct = mutate('Deployment', workload('Deployment', { containers: [{ name: 'app', env: [{ name: 'OTEL_RESOURCE_ATTRIBUTES', valueFrom: { fieldRef: { fieldPath: otel } } }] }] }));
    expect(direct.allowed && direct.warnings).toEqual(['env app/OTEL_RESOURCE_ATTRIBUTES reads an ownerrefs.dev annotation through valueFrom: an injector that extends OTEL_RESOURCE_ATTRIBUTES ' +
      '(the OpenTelemetry operator) makes the pod invalid; read it into a variable of its own and set OTEL_RESOURCE_ATTRIBUTES to "$(THAT_VARIABLE)" (docs/usage/workload-identity.md)']);
    const composed = mutate('Pod', kepPod({ containers: [{ name: 'app', env: [{ name: 'OWNERREFS_OTEL_RESOURCE_ATTRIBUTES', valueFrom: { fieldRef: { fieldPath: otel } } },
      { name: 'OTEL_RESOURCE_ATTRIBUTES', value: '$(OWNERREFS_OTEL_RESOURCE_ATTRIBUTES)' }] }] } as never));
    expect(composed.allowed && composed.warnings).toEqual([]);
  });

  it('is idempotent: a second pass over its own output changes nothing', () => {
    const once = mutated('Pod', kepPod(kepSpec({ init: true })));
    const again = mutate('Pod', once);
    expect(again.allowed && again.patch).toEqual([{ op: 'add', path: `/metadata/annotations/ownerrefs.dev~1owner-references`, value: once.metadata.annotations[OWNERS_ANNOTATION] }]);
    expect(applyPatch(once, again.allowed ? again.patch : [])).toEqual(once);
  });

  it('refuses annotations over the API server\'s 256 KiB, naming the bound, rather than a pod the API server would refuse anyway', () => {
    const many = Array.from({ length: 2_000 }, (_, i) => owner({ name: `o-${String(i).padStart(120, '0')}` }));
    const m = mutate('Pod', kepPod(kepSpec(), many));
    expect(m.allowed).toBe(false);
    expect(!m.allowed && m.message).toMatch(new RegExp(`the annotations would come to \\d+ bytes with ownerrefs.dev/owner-references, over the ${MAX_ANNOTATION_BYTES} bytes the API server allows`));
  });

  it('refuses owners Kubernetes would not decode (an offline manifest), naming the field', () => {
    const m = mutate('Pod', { kind: 'Pod', metadata: { name: 'p', ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'n' }, 'junk'] }, spec: kepSpec() });
    expect(!m.allowed && m.message).toMatch(/metadata.ownerReferences\[0\].uid: missing.*metadata.ownerReferences\[1\]: not an object/);
  });

  it('adds metadata itself to an offline manifest without any', () => {
    const pod = mutated('Pod', { kind: 'Pod', spec: kepSpec() });
    expect(pod.metadata).toEqual({ annotations: { [OWNERS_ANNOTATION]: '{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}' } });
  });
});

// Whatever a pod's spec reads, an ownerrefs.dev/ annotation on it was written by the webhook
// or the agent: at creation, an author's own value of any of the eleven is set from the truth or removed.
describe('a Pod created carrying our annotations', () => {
  const plainSpec = () => ({ containers: [{ name: 'app', image: 'busybox' }] });
  const readsOwners = () => ({ containers: [{ name: 'app', image: 'busybox', env: [{ name: 'O', valueFrom: { fieldRef: { fieldPath: READS_OWNERS } } }] }] });
  const readsNode = () => ({ containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'p', downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: "metadata.annotations['ownerrefs.dev/node-owner-references']" } }] } }] });
  const pod = (spec: unknown, annotations: Record<string, string>) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'ns', annotations, ownerReferences: [KEP_OWNERS[0]] }, spec });
  const forged = Object.fromEntries(ANNOTATION_KEYS.map((k) => [k, 'payments']));

  it.each<{ what: string; spec: unknown; annotations: Record<string, string>; after: Record<string, string> }>([
    { what: 'one key, read by nothing', spec: plainSpec(), annotations: { 'ownerrefs.dev/workload-name': 'payments', keep: 'me' }, after: { keep: 'me' } },
    { what: 'all eleven keys, read by nothing', spec: plainSpec(), annotations: { ...forged, keep: 'me' }, after: { keep: 'me' } },
    { what: 'a key not read beside one read', spec: readsOwners(), annotations: { [OWNERS_ANNOTATION]: 'forged', 'ownerrefs.dev/workload-owner-references': 'forged' },
      after: { [OWNERS_ANNOTATION]: renderOwnerReferencesJson([KEP_OWNERS[0]!]) } },
    { what: "the Node's key, which admission cannot know", spec: readsNode(), annotations: { 'ownerrefs.dev/node-owner-references': 'forged' }, after: {} },
    { what: 'none of ours (the emptyDir opt-in and an unknown key of the prefix stay)', spec: plainSpec(),
      annotations: { 'ownerrefs.dev/volume': 'podinfo', 'ownerrefs.dev/unknown': 'x' }, after: { 'ownerrefs.dev/volume': 'podinfo', 'ownerrefs.dev/unknown': 'x' } },
  ])('$what: each set from the truth or removed', ({ spec, annotations, after }) => {
    expect(mutated('Pod', pod(spec, annotations)).metadata.annotations).toEqual(after);
  });

  it('keeps them on an UPDATE, where they are the agent\'s', () => {
    expect(mutate('Pod', pod(plainSpec(), forged), { update: true })).toEqual({ allowed: true, patch: [], changed: [], annotations: [], warnings: [] });
  });

  it('says in the log which it removed', () => {
    const m = mutate('Pod', pod(plainSpec(), { 'ownerrefs.dev/workload-name': 'payments' }));
    expect(m.allowed && m.changed).toEqual(['annotation ownerrefs.dev/workload-name removed']);
  });
});

describe.each(WORKLOAD_KINDS)('a %s in KEP-4753 syntax', (kind) => {
  it('has its template\'s fieldRefs pointed at the annotations, and no annotation set on it or its template', () => {
    const obj = workload(kind, kepSpec({ init: true }));
    const out = mutated(kind, obj);
    const spec = specOf(kind, out);
    expect(spec.containers[0].env[1]).toEqual({ name: 'OWNER_REFERENCES', valueFrom: { fieldRef: { fieldPath: READS_OWNERS } } });
    expect(spec.initContainers[0].env[1].valueFrom.fieldRef.fieldPath).toBe(READS_OWNERS);
    expect(spec.volumes[1].downwardAPI.items[0].fieldRef.fieldPath).toBe(READS_OWNERS);
    expect(JSON.stringify(out)).not.toContain('"annotations"');
  });

  it('is unchanged by a second pass (a re-apply of the stored object never starts a rollout)', () => {
    const once = mutated(kind, workload(kind, kepSpec()));
    expect(mutate(kind, once)).toEqual({ allowed: true, patch: [], changed: [], annotations: [], warnings: [] });
  });
});

describe('a Pod that reads its workload', () => {
  const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d4f8c9b7', uid: 'rs-1', controller: true, blockOwnerDeletion: true };
  const deploy = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-1', controller: true, blockOwnerDeletion: true };
  const reads = (...keys: string[]) => ({ containers: [{ name: 'app', env: keys.map((k, i) => ({ name: `E${i}`, valueFrom: { fieldRef: { fieldPath: `metadata.annotations['ownerrefs.dev/${k}']` } } })) }] });

  it('gets the values its spec reads, from the chain read at admission, and no other', () => {
    const m = mutate('Pod', kepPod(reads('workload-name', 'workload-kind', 'controller-name', 'otel-resource-attributes') as never, [rs]),
      { chain: () => ({ items: [rs, deploy], end: { reason: 'Top', message: '' } }) });
    expect(m.allowed && m.patch).toEqual([{ op: 'add', path: '/metadata/annotations', value: {
      'ownerrefs.dev/workload-kind': 'Deployment', 'ownerrefs.dev/workload-name': 'web', 'ownerrefs.dev/controller-name': 'web-5d4f8c9b7',
      'ownerrefs.dev/otel-resource-attributes': 'k8s.replicaset.name=web-5d4f8c9b7,k8s.replicaset.uid=rs-1,k8s.deployment.name=web,k8s.deployment.uid=d-1',
    } }]);
  });

  it('says the chain is unresolved where it could not be read (without a reader: Pending), and still knows its own controller', () => {
    const pod = mutated('Pod', kepPod(reads('workload-uid', 'controller-uid') as never, [rs]));
    expect(pod.metadata.annotations).toEqual({ 'ownerrefs.dev/workload-uid': '(unresolved: Pending)', 'ownerrefs.dev/controller-uid': 'rs-1' });
  });
});
