import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../agent/common/errors.ts';
import { MAX_OWNER_BUDGET_MS, parseWebhookConfig } from '../../../../agent/admission/webhook/config.ts';
import { WEBHOOK_TIMEOUT_SECONDS } from '../../../../agent/common/defaults.ts';

describe('parseWebhookConfig --owner-budget-ms', () => {
  it('is bounded by the webhook\'s timeout, less half a second for the rest of the review', () => {
    expect(MAX_OWNER_BUDGET_MS).toBe(WEBHOOK_TIMEOUT_SECONDS * 1000 - 500);
    expect(parseWebhookConfig([], {}).ownerBudgetMs).toBe(1000);
    expect(parseWebhookConfig([`--owner-budget-ms=${MAX_OWNER_BUDGET_MS - 1}`], {}).ownerBudgetMs).toBe(MAX_OWNER_BUDGET_MS - 1);
  });

  it.each([
    { what: 'the bound itself', argv: [`--owner-budget-ms=${MAX_OWNER_BUDGET_MS}`], env: {} },
    { what: 'the whole timeout', argv: [`--owner-budget-ms=${WEBHOOK_TIMEOUT_SECONDS * 1000}`], env: {} },
    { what: 'more, from the environment', argv: [], env: { OWNERREFS_OWNER_BUDGET_MS: '60000' } },
  ])('refuses $what in one line naming the flag and the bound (a slower review fails pod creation)', ({ argv, env }) => {
    let caught: unknown;
    try {
      parseWebhookConfig(argv, env);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toMatch(new RegExp(`^--owner-budget-ms must be under ${MAX_OWNER_BUDGET_MS} \\(the webhook's ${WEBHOOK_TIMEOUT_SECONDS} s timeout less 500 ms, [^\\n]*\\); got "\\d+"$`));
  });
});

describe('parseWebhookConfig --shutdown-delay-seconds', () => {
  it.each([
    { argv: [], env: {}, ms: 5_000 },
    { argv: ['--shutdown-delay-seconds=0'], env: {}, ms: 0 },
    { argv: [], env: { OWNERREFS_SHUTDOWN_DELAY_SECONDS: '2.5' }, ms: 2_500 },
    { argv: ['--shutdown-delay-seconds=1'], env: { OWNERREFS_SHUTDOWN_DELAY_SECONDS: '9' }, ms: 1_000 },
  ])('$argv $env: $ms ms', ({ argv, env, ms }) => {
    expect(parseWebhookConfig(argv, env).shutdownDelayMs).toBe(ms);
  });

  it.each(['-1', 'soon'])('refuses %j', (v) => {
    expect(() => parseWebhookConfig([`--shutdown-delay-seconds=${v}`], {})).toThrow(`--shutdown-delay-seconds must be a number >= 0, got ${JSON.stringify(v)}`);
  });
});
