// Which processes a real node's teardown kills (step 3 of localcluster/node/realnode.ts):
// its shims and whatever still runs in its pods' cgroups, nothing of another node's.
import { describe, expect, it } from 'vitest';
import { leftoverPids } from '../../../localcluster/node/realnode.ts';

const WORK = '/tmp/ownerrefs-node-AAAAAA';
const OURS = '097d0fef-f1c5-42d7-bbe4-88a52c2ce677';
const THEIRS = '5b0c1f7e-0000-4000-8000-000000000001';
const cgroupfs = (uid: string) => `0::/kubepods/burstable/pod${uid}/d2d55253617c27b2a27aba3232302268ac85f24de6d3760b5f9c4459dffbf32e\n`;
const systemd = (uid: string) => `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid.replaceAll('-', '_')}.slice/cri-containerd-abc.scope\n`;
const shim = (work: string) => ['/usr/bin/containerd-shim-runc-v2', '-namespace', 'k8s.io', '-id', 'abc', '-address', `${work}/containerd.sock`].join('\0');

describe('a real node\'s teardown kills', () => {
  it.each([
    ['its own containerd shim', shim(WORK), '0::/\n', true],
    ['another node\'s shim', shim('/tmp/ownerrefs-node-BBBBBB'), '0::/\n', false],
    ['a container left running in one of its pods (cgroupfs driver)', 'node\0dist/agent/main.js\0run', cgroupfs(OURS), true],
    ['a container left running in one of its pods (systemd driver)', ['sleep', '600'].join('\0'), systemd(OURS), true],
    ['a container of another node\'s pod', ['sleep', '600'].join('\0'), cgroupfs(THEIRS), false],
    ['a process outside any pod that names the work directory', `node\0--kubelet-root=${WORK}/kubelet`, '0::/user.slice\n', false],
    ['a process with no cgroup file left (exited meanwhile)', '', '', false],
  ])('%s', (_name, cmdline, cgroup, killed) => {
    expect(leftoverPids([{ pid: 42, cmdline, cgroup }], WORK, new Set([OURS]))).toEqual(killed ? [42] : []);
  });
});
