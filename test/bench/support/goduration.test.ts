import { describe, expect, it } from 'vitest';
import { goDurationMs } from '../../../bench/support/goduration.ts';

describe('reading a Go duration as the kubelet prints it', () => {
  it.each([
    ['1.234567s', 1234.567], ['834.2ms', 834.2], ['950µs', 0.95], ['950us', 0.95], ['1m2.5s', 62_500], ['1h0m0s', 3_600_000], ['0s', 0], ['12ns', 12e-6],
  ])('%s is %d ms', (s, ms) => {
    expect(goDurationMs(s)).toBeCloseTo(ms, 9);
  });

  it.each(['', '1.2', 's', '1.2sx', 'in 1s'])('refuses %j', (s) => {
    expect(() => goDurationMs(s)).toThrow(/not a Go duration/);
  });
});
