import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { diskUID, parseVolumeList, resolveVolumes, MAX_VOLUMES_PER_POD } from '../../../../agent/files/volume/resolve.ts';
import { pod } from '../../../support/fixtures.ts';

const ROOT = '/var/lib/kubelet';

describe('parseVolumeList', () => {
  it.each([
    { value: 'podinfo', names: ['podinfo'] },
    { value: 'a,b', names: ['a', 'b'] },
    { value: ' a , b ', names: ['a', 'b'] },
    { value: 'a,a', names: ['a'] },
    { value: 'x'.repeat(63), names: ['x'.repeat(63)] },
  ])('accepts $value', ({ value, names }) => {
    expect(parseVolumeList(value)).toEqual({ names, errors: [] });
  });

  it.each([
    '', ',', 'a,,b', '..', '.', '../../etc', '/etc/passwd', 'a/b', 'Podinfo', 'pod_info', '-a', 'a-',
    'x'.repeat(64), 'ünï', 'a\0b', 'a\nb', '~', 'kubernetes.io~empty-dir',
  ])('rejects %j as InvalidAnnotation', (value) => {
    const { names, errors } = parseVolumeList(value);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((e) => e.reason === 'InvalidAnnotation')).toBe(true);
    for (const n of names) expect(n).toMatch(/^[a-z0-9-]+$/);
  });

  it('reports each bad name once, however often the list repeats it', () => {
    const { names, errors } = parseVolumeList(',,a,,B,B');
    expect(names).toEqual(['a']);
    expect(errors.map((e) => e.message.match(/: (".*?") is not/)?.[1])).toEqual(['""', '"B"']);
  });

  it('refuses more than the maximum number of volumes', () => {
    const value = Array.from({ length: MAX_VOLUMES_PER_POD + 1 }, (_, i) => `v${i}`).join(',');
    expect(parseVolumeList(value).errors[0]?.message).toMatch(/at most/);
  });

  it('bounds pod-controlled text quoted in messages', () => {
    const { errors } = parseVolumeList('A'.repeat(100_000));
    expect(errors[0]!.message.length).toBeLessThan(400);
  });
});

describe('diskUID', () => {
  it('uses metadata.uid for ordinary pods and the mirror annotation for static pods', () => {
    expect(diskUID(pod({ uid: 'abc-123' })).uid).toBe('abc-123');
    expect(diskUID(pod({ uid: 'abc', annotations: { 'kubernetes.io/config.mirror': 'f00dfeed' } })).uid).toBe('f00dfeed');
  });

  it.each(['../../../etc', '..', '.', '/abs', 'a/b', '', '.hidden', 'x'.repeat(200), 'a\0b'])(
    'rejects the mirror annotation %j', (v) => {
      const r = diskUID(pod({ annotations: { 'kubernetes.io/config.mirror': v } }));
      expect(r.uid).toBeUndefined();
      expect(r.error?.reason).toBe('InvalidMirrorUID');
    });

  it.each(['../x', '', 'a/b'])('rejects metadata.uid %j as InvalidUID, naming metadata.uid, not the mirror annotation', (v) => {
    const r = diskUID(pod({ uid: v }));
    expect(r.uid).toBeUndefined();
    expect(r.error?.reason).toBe('InvalidUID');
    expect(r.error?.message).toMatch(/^metadata\.uid /);
  });
});

describe('resolveVolumes', () => {
  it('maps an emptyDir to its kubelet path', () => {
    const { volumes, errors } = resolveVolumes(pod({ uid: 'u1' }), ROOT);
    expect(errors).toEqual([]);
    expect(volumes.map((v) => path.join(v.target.root, ...v.target.components)))
      .toEqual(['/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/podinfo']);
  });

  it.each(['hostPath', 'configMap', 'secret', 'projected', 'csi', 'downwardAPI', 'persistentVolumeClaim'])(
    'refuses a %s volume as UnsupportedVolumeType', (type) => {
      const { volumes, errors } = resolveVolumes(pod({ volumes: [{ name: 'podinfo', [type]: {} }] }), ROOT);
      expect(volumes).toEqual([]);
      expect(errors.map((e) => e.reason)).toEqual(['UnsupportedVolumeType']);
    });

  it('reports a volume the pod does not declare, and still serves the valid one', () => {
    const { volumes, errors } = resolveVolumes(pod({ annotation: 'podinfo,missing' }), ROOT);
    expect(volumes.map((v) => v.name)).toEqual(['podinfo']);
    expect(errors.map((e) => [e.reason, e.context.volume])).toEqual([['VolumeNotDeclared', 'missing']]);
    expect(errors[0]!).toMatchObject({ context: { volume: 'missing' }, message: expect.stringMatching(/names it, but the pod has no volume of that name; add an emptyDir volume of that name/) });
  });

  it('never yields a path outside <root>/pods/<uid>/volumes/kubernetes.io~empty-dir', () => {
    const hostile = ['../x', 'a/../../b', '/x', '..', '%2e%2e'];
    for (const h of hostile) {
      const { volumes } = resolveVolumes(pod({ uid: 'u', annotation: h, volumes: [{ name: h, emptyDir: {} }] }), ROOT);
      expect(volumes).toEqual([]);
    }
  });
});
