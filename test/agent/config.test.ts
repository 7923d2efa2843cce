// The CSI flags: off unless asked for, so emptyDir-only agents are unaffected.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseRunConfig, runHelp } from '../../agent/config.ts';

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
