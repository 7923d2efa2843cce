import { describe, expect, it } from 'vitest';
import { annotationChanges, annotationRead, annotationsRead, unknownAnnotationRead } from '../../projections/annotations.ts';
import { renderChainJson, type ControllerChain } from '../../projections/chain.ts';
import { renderOwnerReferencesJson } from '../../projections/ownerreferences.ts';
import { KEP_OWNERS } from '../support/fixtures.ts';
import { annotationField, ANNOTATIONS } from '../../projections/names.ts';

const env = (fieldPath: string) => ({ name: 'E', valueFrom: { fieldRef: { fieldPath } } });
const item = (fieldPath: string) => ({ path: 'p', fieldRef: { fieldPath } });

describe('which of our annotations a pod spec reads', () => {
  it.each([
    { where: 'a container\'s env, in the KEP syntax', spec: { containers: [{ env: [env('metadata.ownerReferences')] }] }, reads: [ANNOTATIONS.ownerReferences] },
    { where: 'an init container\'s env, rewritten', spec: { initContainers: [{ env: [env(annotationField(ANNOTATIONS.ownerReferences))] }] }, reads: [ANNOTATIONS.ownerReferences] },
    { where: 'an ephemeral container\'s env', spec: { ephemeralContainers: [{ env: [env('ownerrefs.dev/workloadOwnerReferences')] }] }, reads: [ANNOTATIONS.workload] },
    { where: 'a downwardAPI volume', spec: { volumes: [{ downwardAPI: { items: [item('ownerrefs.dev/nodeOwnerReferences'), item('metadata.name')] } }] }, reads: [ANNOTATIONS.node] },
    { where: 'a projected volume beside other sources', spec: { volumes: [{ projected: { sources: [{ secret: {} }, { downwardAPI: { items: [item(annotationField(ANNOTATIONS.chain))] } }] } }] }, reads: [ANNOTATIONS.chain] },
    { where: 'everywhere at once, in a fixed order', spec: { containers: [{ env: [env('ownerrefs.dev/nodeOwnerReferences'), env('metadata.ownerReferences')] }], volumes: [{ downwardAPI: { items: [item('ownerrefs.dev/controllerChain')] } }] },
      reads: [ANNOTATIONS.ownerReferences, ANNOTATIONS.chain, ANNOTATIONS.node] },
    { where: 'other fields and annotations only', spec: { containers: [{ env: [env('metadata.name'), env("metadata.annotations['x.io/y']"), { name: 'V', value: 'metadata.ownerReferences' }] }] }, reads: [] },
    { where: 'hostile shapes', spec: { containers: 'x', volumes: [null, { downwardAPI: { items: 7 } }, { projected: { sources: [null] } }] }, reads: [] },
  ])('$where', ({ spec, reads }) => {
    expect(annotationsRead(spec)).toEqual(reads);
  });

  it('knows only its own keys, and names a typo of one as unknown (not ownerrefs.dev/volume, which is ours too)', () => {
    expect(annotationRead("metadata.annotations['ownerrefs.dev/owner-references']")).toBe(ANNOTATIONS.ownerReferences);
    expect(annotationRead('constructor')).toBeUndefined();
    expect(unknownAnnotationRead("metadata.annotations['ownerrefs.dev/owner-reference']")).toBe('ownerrefs.dev/owner-reference');
    expect(unknownAnnotationRead("metadata.annotations['ownerrefs.dev/volume']")).toBeUndefined();
    expect(unknownAnnotationRead("metadata.annotations['ownerrefs.dev/owner-references']")).toBeUndefined();
  });
});

describe('annotationChanges', () => {
  const owners = [KEP_OWNERS[0]!];
  const kep = renderOwnerReferencesJson(owners);
  const node = { name: 'n1', uid: 'node-uid' };
  const chain = (reason: ControllerChain['end']['reason']): ControllerChain => ({ items: owners, end: { reason, message: '' } });
  const { ownerReferences: O, node: N, chain: C, workload: W, workloadName: WN } = ANNOTATIONS;

  it.each([
    { what: 'a value in place that is right: nothing', keys: [O], ctx: {}, current: { [O]: kep }, want: {} },
    { what: 'a forged or stale value: the right one', keys: [O], ctx: {}, current: { [O]: 'forged' }, want: { [O]: kep } },
    { what: 'no annotations at all', keys: [O], ctx: {}, current: null, want: { [O]: kep } },
    { what: 'the Node before it is known: left', keys: [N], ctx: {}, current: {}, want: {} },
    { what: 'the Node once known', keys: [N], ctx: { node }, current: {}, want: { [N]: '[{"apiVersion":"v1","kind":"Node","name":"n1","uid":"node-uid"}]' } },
    { what: 'the chain where no one walks it: left as admission set it', keys: [C, W], ctx: { node }, current: { [C]: 'x', [W]: 'y' }, want: {} },
    { what: 'a settled chain: written', keys: [W], ctx: { chain: chain('Top') }, current: { [W]: '[]' }, want: { [W]: expect.stringContaining(owners[0]!.uid) } },
    { what: 'an unsettled chain over values in place: left (never blanked)', keys: [C, W], ctx: { chain: chain('Unavailable') }, current: { [C]: 'known', [W]: 'known' }, want: {} },
    ...(['Forbidden', 'NotServed', 'KindNotFollowed'] as const).map((end) => ({ what: `a reader's error (${end}) over values in place: left, as a failed read is`, keys: [C, W], ctx: { chain: chain(end) }, current: { [C]: 'known', [W]: 'known' }, want: {} })),
    { what: 'a fact about the owner (NotFound) over values in place: written', keys: [W], ctx: { chain: chain('NotFound') }, current: { [W]: 'known' }, want: { [W]: '[]' } },
    { what: 'an unsettled chain where there is none yet: written', keys: [C], ctx: { chain: chain('Pending') }, current: {}, want: { [C]: expect.stringContaining('"reason":"Pending"') } },
    { what: 'a reader\'s error over a Pending in place: written (the Pending said a read was under way)', keys: [C, WN], ctx: { chain: chain('Forbidden') },
      current: { [C]: renderChainJson(chain('Pending')), [WN]: '(unresolved: Pending)' }, want: { [C]: expect.stringContaining('"reason":"Forbidden"'), [WN]: '(unresolved: Forbidden)' } },
    { what: 'a reader\'s error over another in place: written', keys: [WN], ctx: { chain: chain('Unavailable') }, current: { [WN]: '(unresolved: Forbidden)' }, want: { [WN]: '(unresolved: Unavailable)' } },
    { what: 'the same error again, said otherwise: left', keys: [C], ctx: { chain: { items: owners, end: { reason: 'Forbidden', message: 'now' } } }, current: { [C]: renderChainJson({ items: owners, end: { reason: 'Forbidden', message: 'then' } }) }, want: {} },
    { what: 'Pending over an error in place: left', keys: [C, WN], ctx: { chain: chain('Pending') }, current: { [C]: renderChainJson(chain('Forbidden')), [WN]: '(unresolved: Forbidden)' }, want: {} },
    { what: 'a reader\'s error over a name in place: left', keys: [WN], ctx: { chain: chain('Forbidden') }, current: { [WN]: 'web' }, want: {} },
  ] as { what: string; keys: (typeof ANNOTATIONS)[keyof typeof ANNOTATIONS][]; ctx: object; current: Record<string, string> | null; want: object }[])('$what', ({ keys, ctx, current, want }) => {
    expect(Object.fromEntries(annotationChanges(keys, owners, ctx, current))).toEqual(want);
  });
});
