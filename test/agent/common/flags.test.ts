import { describe, expect, it } from 'vitest';
import { hostPort, localUrlHost } from '../../../agent/common/flags.ts';

describe('listen addresses', () => {
  it.each([
    { addr: ':8080', host: '', url: '127.0.0.1' },
    { addr: '0.0.0.0:8080', host: '0.0.0.0', url: '127.0.0.1' },
    { addr: '[::]:8080', host: '::', url: '[::1]' },
    { addr: '[fd00::5]:8080', host: 'fd00::5', url: '[fd00::5]' },
    { addr: '10.1.2.3:8080', host: '10.1.2.3', url: '10.1.2.3' },
  ])('$addr listens on "$host" and is reached locally at $url', ({ addr, host, url }) => {
    expect(hostPort('health-addr', addr)).toEqual([host, 8080]);
    expect(localUrlHost(host)).toBe(url);
  });

  it.each(['8080', 'x:99999', '[::1]'])('refuses %s, naming the flag', (addr) => {
    expect(() => hostPort('listen', addr)).toThrow(/^--listen must be host:port/);
  });
});
