import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../../agent/common/budget.ts';

describe('ByteBudget', () => {
  it('takes what fits under its bound, refuses the rest without taking any of it, and takes again once given back', () => {
    const b = new ByteBudget(100);
    expect([b.take(60), b.take(40), b.used]).toEqual([true, true, 100]);
    expect([b.take(1), b.used]).toEqual([false, 100]);
    b.give(40);
    expect([b.take(41), b.used]).toEqual([false, 60]);
    expect([b.take(40), b.used]).toEqual([true, 100]);
  });
});
