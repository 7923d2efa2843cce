// Target paths come from the kubelet, which is trusted; they are still parsed strictly.
import { describe, expect, it } from 'vitest';
import { parseTargetPath } from '../../../../agent/files/csi/paths.ts';

const ROOT = '/var/lib/kubelet';
const UID = '6be1683f-da9c-4f68-9440-82376231cfa6';
const GOOD = `${ROOT}/pods/${UID}/volumes/kubernetes.io~csi/podinfo/mount`;

describe('parseTargetPath', () => {
  it('accepts the kubelet\'s layout and names the pod directory, the volume and the components to walk', () => {
    expect(parseTargetPath(ROOT, GOOD)).toEqual({
      diskUid: UID, volume: 'podinfo',
      target: { root: ROOT, components: ['pods', UID, 'volumes', 'kubernetes.io~csi', 'podinfo', 'mount'] },
    });
  });

  it.each([
    ['empty', ''],
    ['relative', `var/lib/kubelet/pods/${UID}/volumes/kubernetes.io~csi/podinfo/mount`],
    ['trailing slash', `${GOOD}/`],
    ['double slash', GOOD.replace('/pods/', '//pods/')],
    ['dot component', GOOD.replace('/volumes/', '/./volumes/')],
    ['dot-dot escaping the pod', `${ROOT}/pods/${UID}/volumes/kubernetes.io~csi/../../../../etc/mount`],
    ['NUL byte', GOOD.replace('podinfo', 'pod\0info')],
    ['outside the root', `/var/lib/kubelet2/pods/${UID}/volumes/kubernetes.io~csi/podinfo/mount`],
    ['the root itself', ROOT],
    ['too deep', `${GOOD}/deeper`],
    ['too shallow', `${ROOT}/pods/${UID}/volumes/kubernetes.io~csi/mount`],
    ['emptyDir plugin', GOOD.replace('kubernetes.io~csi', 'kubernetes.io~empty-dir')],
    ['not "mount"', GOOD.replace(/mount$/, 'target')],
    ['uid with a leading dot', GOOD.replace(UID, '.hidden')],
    ['uid too long', GOOD.replace(UID, 'a'.repeat(200))],
    ['volume with upper case', GOOD.replace('podinfo', 'PodInfo')],
    ['volume with a leading dash', GOOD.replace('podinfo', '-podinfo')],
    ['volume with a space', GOOD.replace('podinfo', 'pod info')],
  ])('refuses %s', (_what, p) => {
    expect(typeof parseTargetPath(ROOT, p)).toBe('string');
  });

  it('quotes a hostile path boundedly in its refusal', () => {
    const msg = parseTargetPath(ROOT, `/x/${'y'.repeat(5000)}`) as string;
    expect(msg.length).toBeLessThan(600);
  });
});
