import { beforeAll, describe, expect, it } from 'vitest';
import { keepWhileUnsettled, renderChainJson, renderNodeOwnerJson, renderWorkloadJson, workloadOfChainFile } from '../../projections/chain.ts';
import { FILES, project, type ControllerChain, type OwnerReference } from '../../projections/index.ts';
import { checkSource, renderDownwardAPI } from '../../projections/downwardapi.ts';
import { HOSTILE_STRINGS, owner, pod } from '../support/fixtures.ts';
import { buildOracle, goMarshal } from '../support/gooracle.ts';

beforeAll(() => buildOracle(), 120_000);

const rs = owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-1' });
const dep = owner({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'dep-1', blockOwnerDeletion: undefined });
/** Go's encoding of the owners, as the KEP file's items hold it. */
const goItems = (owners: Parameters<typeof goMarshal>[0]) => goMarshal(owners).replace(/^\{"kind":"OwnerReference","apiVersion":"meta\/v1","items":/, '').slice(0, -1);

describe('controllerChain', () => {
  it.each([
    { name: 'a Deployment chain', chain: { items: [rs, dep], end: { reason: 'Top', message: 'Deployment web has no controlling owner' } } },
    { name: 'a bare pod', chain: { items: [], end: { reason: 'NoController', message: 'the pod has no controlling owner' } } },
    ...HOSTILE_STRINGS.map((s) => ({ name: `hostile ${JSON.stringify(s)}`, chain: { items: [owner({ name: s, kind: s })], end: { reason: 'NotFound', message: s } } })),
  ] as { name: string; chain: ControllerChain }[])('is Go encoding of each owner, in a documented wrapper: $name', ({ chain }) => {
    const text = renderChainJson(chain);
    expect(text).toBe(`{"kind":"ControllerChain","apiVersion":"ownerrefs.dev/v1","items":${goItems(chain.items)},"end":{"reason":${JSON.stringify(chain.end.reason)},"message":${goItems([owner({ name: chain.end.message })]).match(/"name":("(?:[^"\\]|\\.)*")/)![1]}}}`);
    expect(JSON.parse(text)).toMatchObject({ items: chain.items.map((i) => ({ uid: i.uid })), end: { reason: chain.end.reason } });
  });
});

describe('workloadOwnerReferences', () => {
  it('is the top of a chain that reached it, ready to paste (no controller, no blockOwnerDeletion)', () => {
    expect(renderWorkloadJson({ items: [rs, dep], end: { reason: 'Top', message: '' } })).toBe('[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"dep-1"}]');
  });
  it.each(['Pending', 'NotFound', 'KindNotFollowed', 'Forbidden', 'Cycle', 'TooLong'] as const)('is [] when the chain ended with %s: no guess', (reason) => {
    expect(renderWorkloadJson({ items: [rs], end: { reason, message: '' } })).toBe('[]');
  });
});

describe('keepWhileUnsettled: which files in place an unsettled chain leaves alone', () => {
  const startsWithOne = (rule: { prefixes: readonly Buffer[] }, text: string) => rule.prefixes.some((p) => Buffer.from(text).subarray(0, p.length).equals(p));
  const top = renderChainJson({ items: [rs, dep], end: { reason: 'Top', message: 'Deployment web has no controlling owner' } });
  it.each([
    { what: 'the settled chain it leads to', pending: [rs], old: top, keep: true },
    { what: 'a chain that ended at the same owner', pending: [rs], old: renderChainJson({ items: [rs], end: { reason: 'NotFound', message: 'x' } }), keep: true },
    { what: 'an older Pending chain (an error that followed replaces it)', pending: [rs], old: renderChainJson({ items: [rs], end: { reason: 'Pending', message: 'reading' } }), keep: ['Pending'] },
    { what: 'the same error, said otherwise (a retry failing again rewrites nothing)', pending: [rs], old: renderChainJson({ items: [rs], end: { reason: 'Forbidden', message: 'older words' } }), keep: ['Pending', 'Forbidden'] },
    { what: 'a chain through another owner (the pod was adopted)', pending: [owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-77aa', uid: 'rs-2' })], old: top, keep: false },
    { what: 'a chain whose first owner has a longer uid', pending: [owner({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-' })], old: top, keep: false },
    { what: 'a chain that knows more than the old one', pending: [rs, dep], old: renderChainJson({ items: [rs], end: { reason: 'Pending', message: '' } }), keep: false },
    { what: 'a bare pod\'s chain', pending: [rs], old: renderChainJson({ items: [], end: { reason: 'NoController', message: '' } }), keep: false },
    ...HOSTILE_STRINGS.map((h) => ({ what: `hostile ${JSON.stringify(h)} in the old end`, pending: [rs], old: renderChainJson({ items: [rs], end: { reason: 'Unavailable', message: `],"end":${h}` } }), keep: ['Pending', 'Unavailable'] })),
  ] as { what: string; pending: OwnerReference[]; old: string; keep: boolean | string[] }[])('the reader-side ends (Pending, Unavailable, Forbidden, NotServed, KindNotFollowed) keep $what: $keep', ({ pending, old, keep }) => {
    for (const reason of ['Pending', 'Unavailable', 'Forbidden', 'NotServed', 'KindNotFollowed'] as const) {
      const rule = keepWhileUnsettled({ items: pending, end: { reason, message: `reading ${'"],"end":'}` } }, 'controllerChain')!;
      expect(startsWithOne(rule.chain, old), reason).toBe(Array.isArray(keep) ? keep.includes(reason) : keep);
      expect(rule.workload.group).toBe(rule.chain.group); // kept together or not at all
      expect(startsWithOne(rule.workload, renderWorkloadJson(JSON.parse(old) as ControllerChain))).toBe(true);
      expect(rule.workload.matches?.of).toBe('controllerChain');
      expect(rule.workload.matches?.derive(Buffer.from(old))?.toString()).toBe(renderWorkloadJson(JSON.parse(old) as ControllerChain));
    }
  });
  it.each(['Top', 'NoController', 'NotFound', 'UIDMismatch', 'Cycle', 'TooLong', 'NotFollowed'] as const)(
    'a settled chain (%s: a fact about the owners) keeps nothing: its answer is written', (reason) => {
      expect(keepWhileUnsettled({ items: [rs], end: { reason, message: '' } }, 'c')).toBeUndefined();
    });
  it.each([
    { what: 'a Top chain: its top, ready to paste', bytes: top, want: '[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"dep-1"}]' },
    { what: 'a Pending chain: unknown', bytes: renderChainJson({ items: [rs], end: { reason: 'Pending', message: '' } }), want: '[]' },
    ...HOSTILE_STRINGS.map((h) => ({ what: `a hostile owner ${JSON.stringify(h)}`, bytes: renderChainJson({ items: [owner({ name: h, kind: h, uid: h })], end: { reason: 'Top', message: h } }),
      want: renderWorkloadJson({ items: [owner({ name: h, kind: h, uid: h })], end: { reason: 'Top', message: h } }) })),
    { what: 'not JSON', bytes: '{"kind":"Controll', want: undefined },
    { what: 'JSON that is no chain', bytes: '[1,2]', want: undefined },
    { what: 'a chain without its end', bytes: '{"items":[]}', want: undefined },
  ])('the workload file that goes with $what', ({ bytes, want }) => {
    expect(workloadOfChainFile(Buffer.from(bytes))?.toString()).toBe(want);
  });
  it('a chain that knows no owner keeps nothing', () => {
    expect(keepWhileUnsettled({ items: [], end: { reason: 'Pending', message: '' } }, 'c')).toBeUndefined();
  });
  it('project gives the rule to the chain and workload files only, the workload tied to the chain file', () => {
    const files = project(pod({ owners: [rs] }), { envFile: true, dependentsFile: true, nodeFile: true, followOwners: true },
      { node: { name: 'n', uid: 'u' }, chain: { items: [rs], end: { reason: 'Pending', message: '' } } });
    expect(files.filter((f) => f.keep).map((f) => f.path)).toEqual([FILES.chain, FILES.workload]);
    expect(files.find((f) => f.path === FILES.workload)!.keep!.matches!.of).toBe(FILES.chain);
  });
});

describe('nodeOwnerReferences', () => {
  it('names the Node, ready to paste', () => {
    expect(renderNodeOwnerJson({ name: 'worker-1', uid: 'n-1' })).toBe('[{"apiVersion":"v1","kind":"Node","name":"worker-1","uid":"n-1"}]');
  });
});

describe('project with the context', () => {
  const p = pod({ owners: [rs] });
  const chain: ControllerChain = { items: [rs, dep], end: { reason: 'Top', message: '' } };
  it('writes the node file when on and the Node is known, and the chain files only when following', () => {
    const names = (o: Parameters<typeof project>[1], ctx: Parameters<typeof project>[2]) => project(p, o, ctx).map((f) => f.path);
    const all = { envFile: true, dependentsFile: true, nodeFile: true, followOwners: true };
    expect(names(all, { node: { name: 'n', uid: 'u' }, chain })).toEqual([FILES.env, FILES.dependents, FILES.node, FILES.chain, FILES.workload, FILES.ownerReferences]);
    expect(names({ ...all, followOwners: false }, { node: { name: 'n', uid: 'u' }, chain })).not.toContain(FILES.chain);
    expect(names({ ...all, nodeFile: false }, { node: { name: 'n', uid: 'u' } })).not.toContain(FILES.node);
    expect(names(all, {})).toEqual([FILES.env, FILES.dependents, FILES.ownerReferences]);
    expect(project(p, all, { chain }).at(-1)!.path).toBe(FILES.ownerReferences); // still last: apps wait for it
  });
});

describe('the same files as downwardAPI items (the extension field paths)', () => {
  const items = { items: [
    { path: 'chain', fieldRef: { fieldPath: 'ownerrefs.dev/controllerChain' } },
    { path: 'workload', fieldRef: { fieldPath: 'ownerrefs.dev/workloadOwnerReferences' } },
    { path: 'node', fieldRef: { fieldPath: 'ownerrefs.dev/nodeOwnerReferences' } },
  ] };
  const text = (files: ReturnType<typeof renderDownwardAPI>) => Object.fromEntries(files.map((f) => [f.path, f.bytes.toString('utf8')]));

  it('are valid items and render exactly the files', () => {
    expect(checkSource(items)).toEqual([]);
    const chain: ControllerChain = { items: [rs, dep], end: { reason: 'Top', message: 'm' } };
    expect(text(renderDownwardAPI(pod({ owners: [rs] }), items, {}, { chain, node: { name: 'n', uid: 'u' } }))).toEqual({
      chain: renderChainJson(chain), workload: renderWorkloadJson(chain), node: renderNodeOwnerJson({ name: 'n', uid: 'u' }),
    });
  });

  it('say NotFollowed on a node that does not follow owners, and [] before the Node is known', () => {
    const t = text(renderDownwardAPI(pod({ owners: [rs] }), items));
    expect(JSON.parse(t.chain!)).toMatchObject({ items: [], end: { reason: 'NotFollowed' } });
    expect(t.workload).toBe('[]');
    expect(t.node).toBe('[]');
  });
  const item = (path: string, field: string) => ({ path, fieldRef: { fieldPath: `ownerrefs.dev/${field}` } });
  it.each([
    { what: 'chain and workload items side by side', list: [item('c', 'controllerChain'), item('w', 'workloadOwnerReferences'), item('n', 'nodeOwnerReferences')], kept: ['c', 'w'] },
    { what: 'both in one nested directory', list: [item('x/c', 'controllerChain'), item('x/w', 'workloadOwnerReferences')], kept: ['x/c', 'x/w'] },
    { what: 'a workload item without a chain item to vouch for it', list: [item('w', 'workloadOwnerReferences')], kept: [] },
    { what: 'chain and workload in different directories', list: [item('a/c', 'controllerChain'), item('b/w', 'workloadOwnerReferences')], kept: [] },
    { what: 'a chain item alone', list: [item('c', 'controllerChain')], kept: ['c'] },
    { what: 'two chain items and a workload', list: [item('c1', 'controllerChain'), item('w', 'workloadOwnerReferences'), item('c2', 'controllerChain')], kept: ['c1', 'w', 'c2'] },
  ])('while the chain is Pending, keep rules go to $what: $kept', ({ list, kept }) => {
    const src = { items: list };
    expect(checkSource(src)).toEqual([]);
    const pending: ControllerChain = { items: [rs], end: { reason: 'Pending', message: 'm' } };
    const files = renderDownwardAPI(pod({ owners: [rs] }), src, {}, { chain: pending, node: { name: 'n', uid: 'u' } });
    expect(files.filter((f) => f.keep).map((f) => f.path)).toEqual(kept);
    expect(new Set(files.filter((f) => f.keep).map((f) => f.keep!.group)).size).toBeLessThanOrEqual(1);
    const settled = renderDownwardAPI(pod({ owners: [rs] }), src, {}, { chain: { items: [rs, dep], end: { reason: 'Top', message: '' } } });
    expect(settled.filter((f) => f.keep)).toEqual([]);
    // Everything derived is tied to the first chain item, by its own path in the volume.
    const first = list.find((i) => i.fieldRef.fieldPath.endsWith('controllerChain'))?.path;
    for (const f of files.filter((x) => x.keep?.matches)) expect(f.keep!.matches!.of).toBe(first);
    expect(files.find((f) => f.path === first)?.keep?.matches).toBeUndefined();
  });

  it('a second chain item is kept only when it is the same bytes as the first', () => {
    const src = { items: [item('c1', 'controllerChain'), item('c2', 'controllerChain')] };
    const files = renderDownwardAPI(pod({ owners: [rs] }), src, {}, { chain: { items: [rs], end: { reason: 'Pending', message: '' } } });
    const m = files.find((f) => f.path === 'c2')!.keep!.matches!;
    const top = Buffer.from(renderChainJson({ items: [rs, dep], end: { reason: 'Top', message: '' } }));
    expect(m.of).toBe('c1');
    expect(m.derive(top)?.equals(top)).toBe(true);
  });
});
