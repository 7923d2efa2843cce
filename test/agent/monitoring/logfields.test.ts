import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../agent/kube/client.ts';
import { serializeErr } from '../../../agent/monitoring/logfields.ts';

describe('serializeErr', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect' });
  it.each([
    ['a socket error: message and errno, no stack', refused, { type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED' }],
    ['an API status: message and status, no stack', new ApiError(503, 'ServiceUnavailable', 'API 503 ServiceUnavailable: x'),
      { type: 'ApiError', message: 'API 503 ServiceUnavailable: x', status: 503 }],
  ])('%s', (_what, err, logged) => {
    expect(serializeErr(err)).toEqual(logged);
  });

  it('gives any other error pino\'s standard form, stack included (it is a bug to find)', () => {
    const out = serializeErr(new TypeError('x is not a function')) as Record<string, unknown>;
    expect(out).toMatchObject({ type: 'TypeError', message: 'x is not a function' });
    expect(out.stack).toMatch(/^TypeError: x is not a function\n\s+at /);
    expect(serializeErr('text')).toBe('text');
  });
});
