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

describe('run flags', () => {
  it('have the defaults README documents', () => {
    expect(parseRunConfig(base, {})).toEqual({
      nodeName: 'n1', kubeconfig: undefined, kubeletRoot: '/var/lib/kubelet', healthHost: '', healthPort: 8080,
      logLevel: 'info', resyncMs: 60_000, maxBytes: 262_144, stallMs: 90_000, readyDownMs: 60_000, concurrency: 4,
      csiSocket: undefined, registrationDir: '/var/lib/kubelet/plugins_registry', followKinds: [], ownerRefreshMs: 600_000, annotationQps: 20,
    });
  });

  it.each([
    { what: 'a flag over its environment variable', argv: ['--node-name=flag'], env: { NODE_NAME: 'env' }, want: { nodeName: 'flag' } },
    { what: 'the environment over the default', argv: base, env: { OWNERREFS_STALL_SECONDS: '30', LOG_LEVEL: 'debug' }, want: { stallMs: 30_000, logLevel: 'debug' } },
    { what: 'the node name from NODE_NAME (the downward API)', argv: [], env: { NODE_NAME: 'from-env' }, want: { nodeName: 'from-env' } },
    { what: 'a kubeconfig path', argv: [...base, '--kubeconfig=/etc/k.conf'], env: {}, want: { kubeconfig: '/etc/k.conf' } },
    { what: 'an IPv6 health address', argv: [...base, '--health-addr=[::1]:9090'], env: {}, want: { healthHost: '::1', healthPort: 9090 } },
    { what: 'every IPv6 address, bracketed', argv: [...base, '--health-addr=[::]:9090'], env: {}, want: { healthHost: '::', healthPort: 9090 } },
    { what: 'a health address with no host (every address, both families: the default)', argv: [...base, '--health-addr=:9090'], env: {}, want: { healthHost: '', healthPort: 9090 } },
    { what: 'a fractional concurrency, rounded down', argv: [...base, '--concurrency=2.7'], env: {}, want: { concurrency: 2 } },
  ])('take $what', ({ argv, env, want }) => {
    expect(parseRunConfig(argv, env)).toMatchObject(want);
  });

  it.each([
    { what: 'no node name', argv: [], message: /--node-name \(or NODE_NAME\) is required/ },
    { what: 'a health address without a port', argv: [...base, '--health-addr=localhost'], message: /--health-addr must be host:port/ },
    { what: 'a health port over 65535', argv: [...base, '--health-addr=127.0.0.1:99999'], message: /--health-addr must be host:port with a port from 0 to 65535, got "127.0.0.1:99999"/ },
    { what: 'an unknown log level', argv: [...base, '--log-level=verbose'], message: /--log-level must be one of/ },
    { what: 'a resync period that is not a number', argv: [...base, '--resync-seconds=soon'], message: /--resync-seconds must be a number >= 1, got "soon"/ },
    { what: 'a stall bound under a second', argv: [...base, '--stall-seconds=0.5'], message: /--stall-seconds must be a number >= 1/ },
    { what: 'a byte limit under 1 KiB', argv: [...base, '--max-bytes=10'], message: /--max-bytes must be a number >= 1024/ },
    { what: 'a concurrency of zero', argv: [...base, '--concurrency=0'], message: /--concurrency must be a number >= 1/ },
  ])('refuse $what with a ConfigError', ({ argv, message }) => {
    expect(() => parseRunConfig(argv, {})).toThrow(ConfigError);
    expect(() => parseRunConfig(argv, {})).toThrow(message);
  });

  it.each([['--no-such-flag'], ['stray-positional']])('refuse %j as a usage error', (arg) => {
    expect(() => parseRunConfig([...base, arg], {})).toThrow(expect.objectContaining({ code: expect.stringMatching(/^ERR_PARSE_ARGS/) }));
  });

  it('list every flag, its environment variable and its default in --help', () => {
    const help = runHelp();
    for (const [flag, env] of [['node-name', 'NODE_NAME'], ['kubelet-root', 'OWNERREFS_KUBELET_ROOT'], ['stall-seconds', 'OWNERREFS_STALL_SECONDS'], ['concurrency', 'OWNERREFS_CONCURRENCY']]) {
      expect(help).toMatch(new RegExp(`--${flag}[\\s\\S]*env ${env}`));
    }
  });
});
