// `run`'s flags and environment: defaults, precedence, validation.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../agent/common/errors.ts';
import { parseRunConfig, runHelp } from '../../agent/config.ts';

const base = ['--node-name=n1'];

describe('CSI flags', () => {
  it('leave CSI mode off by default, with the kubelet\'s registration directory ready for when it is on', () => {
    expect(parseRunConfig(base, {})).toMatchObject({ csiSocket: undefined, registrationDir: '/var/lib/kubelet/plugins_registry' });
  });

  it.each([
    { what: 'flags', argv: [...base, '--csi-socket=/p/csi.sock', '--registration-dir=/r'], env: {}, want: { csiSocket: '/p/csi.sock', registrationDir: '/r' } },
    { what: 'environment', argv: base, env: { OWNERREFS_CSI_SOCKET: '/e/csi.sock', OWNERREFS_REGISTRATION_DIR: '/er' }, want: { csiSocket: '/e/csi.sock', registrationDir: '/er' } },
    { what: 'an empty registration dir (a registrar sidecar registers)', argv: [...base, '--csi-socket=/p/csi.sock', '--registration-dir='], env: {}, want: { registrationDir: undefined } },
    { what: 'a flag over the environment', argv: [...base, '--csi-socket=/f.sock'], env: { OWNERREFS_CSI_SOCKET: '/e.sock' }, want: { csiSocket: '/f.sock' } },
  ])('are read from $what', ({ argv, env, want }) => {
    expect(parseRunConfig(argv, env)).toMatchObject(want);
  });

  it.each(['csi.sock', './csi.sock', 'unix:///csi.sock'])('refuse the relative socket path %j', (p) => {
    expect(() => parseRunConfig([...base, `--csi-socket=${p}`], {})).toThrow(ConfigError);
  });

  it('appear in --help', () => {
    expect(runHelp()).toMatch(/--csi-socket[\s\S]*OWNERREFS_CSI_SOCKET[\s\S]*--registration-dir/);
  });
});

describe('the kubelet root', () => {
  it('is made absolute once, here, so every module compares the same paths', () => {
    // A relative root used to stay relative: the pod table keyed volumes by relative paths while
    // directory events named absolute ones, so late volumes waited for the resync.
    expect(parseRunConfig([...base, '--kubelet-root=rel/kubelet'], {}).kubeletRoot).toBe(path.resolve('rel/kubelet'));
    expect(parseRunConfig(base, { OWNERREFS_KUBELET_ROOT: '/var/lib/k0s/kubelet/' }).kubeletRoot).toBe('/var/lib/k0s/kubelet');
  });

  it('defaults to /var/lib/kubelet', () => {
    expect(parseRunConfig(base, {}).kubeletRoot).toBe('/var/lib/kubelet');
  });
});
