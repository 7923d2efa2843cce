import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, settingsFromLabels } from '../../../agent/node/nodeconfig.ts';

describe('settingsFromLabels', () => {
  it('uses defaults when no label is set: not paused, the optional files on, owners not followed', () => {
    expect(settingsFromLabels({})).toEqual({ settings: { paused: false, envFile: true, dependentsFile: true, nodeFile: true, followOwners: false }, invalid: [] });
  });

  it.each<{ labels: Record<string, string>; want: object }>([
    { labels: { 'ownerrefs.dev/paused': 'true' }, want: { paused: true } },
    { labels: { 'ownerrefs.dev/env-file': 'false' }, want: { envFile: false } },
    { labels: { 'ownerrefs.dev/dependents-file': 'false' }, want: { dependentsFile: false } },
    { labels: { 'ownerrefs.dev/paused': 'false', 'other.io/x': 'y' }, want: { paused: false } },
  ])('applies $labels', ({ labels, want }) => {
    expect(settingsFromLabels(labels).settings).toEqual({ ...DEFAULT_SETTINGS, ...want });
  });

  it('returns to the default when a label is removed', () => {
    const paused = settingsFromLabels({ 'ownerrefs.dev/paused': 'true' }).settings;
    expect(settingsFromLabels({}, paused).settings.paused).toBe(false);
  });

  it.each(['yes', 'TRUE', '1', '', 'on'])('keeps the last good setting for the invalid value %j and says why', (value) => {
    const last = { ...DEFAULT_SETTINGS, envFile: false };
    const { settings, invalid } = settingsFromLabels({ 'ownerrefs.dev/env-file': value }, last);
    expect(settings.envFile).toBe(false);
    expect(invalid).toEqual([expect.objectContaining({ label: 'ownerrefs.dev/env-file', value })]);
    expect(invalid[0]!.message).toMatch(/use "true" or "false"; keeping ownerrefs.dev\/env-file=false/);
  });

  it.each([
    ['ownerrefs.dev/followOwners', 'ownerrefs.dev/follow-owners'],
    ['ownerrefs.dev/EnvFile', 'ownerrefs.dev/env-file'],
    ['ownerrefs.dev/dependents_file', 'ownerrefs.dev/dependents-file'],
  ])('names the label meant when %s is one of its own but for case or dashes (the setting would keep its default unheard of)', (label, meant) => {
    const { settings, invalid } = settingsFromLabels({ [label]: 'true' });
    expect(settings).toEqual(DEFAULT_SETTINGS);
    expect(invalid).toEqual([{ label, value: 'true', message: `node label ${label} is not one of the agent's: did you mean ${meant}? It is ignored` }]);
  });

  it.each(['ownerrefs.dev/agent', 'ownerrefs.dev/my-selector', 'example.com/follow-owners'])('leaves %s alone (a node selector, or not ours)', (label) => {
    expect(settingsFromLabels({ [label]: 'true' }).invalid).toEqual([]);
  });
});
