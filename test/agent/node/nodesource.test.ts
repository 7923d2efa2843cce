import { describe, expect, it } from 'vitest';
import { NodeConfigSource, type NodeView } from '../../../agent/node/nodesource.ts';
import { DEFAULT_SETTINGS, type NodeSettings } from '../../../agent/node/nodeconfig.ts';
import { memoryLogger, RecordingEvents } from '../../support/agentkit.ts';

const node = (labels: Record<string, string> = {}): NodeView => ({ metadata: { name: 'n1', uid: 'node-uid', labels } });

function source() {
  let current: NodeSettings = DEFAULT_SETTINGS;
  const applied: NodeSettings[] = [];
  const events = new RecordingEvents();
  const { log, lines } = memoryLogger();
  const s = new NodeConfigSource({ current: () => current, apply: (x) => { applied.push(x); current = x; }, events, log });
  return { s, applied, events, lines };
}

describe('NodeConfigSource', () => {
  it('is configured once the Node has been listed, with defaults when the Node is absent', async () => {
    const { s, applied } = source();
    expect(s.configured).toBe(false);
    s.replace([]);
    await s.whenConfigured;
    expect(s.configured).toBe(true);
    expect(applied).toEqual([]);
  });

  it('applies the settings the labels give, and only when they change', () => {
    const { s, applied, lines } = source();
    s.replace([node({ 'ownerrefs.dev/paused': 'true' })]);
    s.upsert(node({ 'ownerrefs.dev/paused': 'true', 'unrelated': 'x' }));
    s.upsert(node({ 'ownerrefs.dev/paused': 'true', 'ownerrefs.dev/env-file': 'false' }));
    expect(applied).toEqual([{ ...DEFAULT_SETTINGS, paused: true }, { ...DEFAULT_SETTINGS, paused: true, envFile: false }]);
    expect(lines.filter((l) => l.msg === 'node settings changed')).toHaveLength(2);
    // The agent's logger names the node in every line (main.ts); naming it again repeats the JSON key.
    for (const l of lines) expect(l).not.toHaveProperty('node');
  });

  it('reports an invalid label once, as a Warning Event on the Node and one log line, and keeps the last good value', () => {
    const { s, applied, events, lines } = source();
    s.upsert(node({ 'ownerrefs.dev/paused': 'true' }));
    for (let i = 0; i < 3; i++) s.upsert(node({ 'ownerrefs.dev/paused': 'yes' })); // a relist, unrelated edits
    expect(applied).toEqual([{ ...DEFAULT_SETTINGS, paused: true }]);
    expect(events.sent).toEqual([{
      obj: { kind: 'Node', name: 'n1', uid: 'node-uid' }, reason: 'OwnerRefsInvalidNodeLabel',
      message: expect.stringMatching(/ownerrefs\.dev\/paused="yes" is invalid: use "true" or "false"; keeping ownerrefs\.dev\/paused=true/),
    }]);
    expect(lines.filter((l) => l.reason === 'InvalidNodeLabel')).toHaveLength(1);
    for (const l of lines) expect(l).not.toHaveProperty('node');
  });

  it('reports the label again when its value changes to another invalid one', () => {
    const { s, events } = source();
    s.upsert(node({ 'ownerrefs.dev/env-file': 'yes' }));
    s.upsert(node({ 'ownerrefs.dev/env-file': 'no' }));
    expect(events.sent).toHaveLength(2);
  });

  it('reports each bad label once while it stays: fixing one of two does not report the other again', () => {
    const { s, events } = source();
    s.upsert(node({ 'ownerrefs.dev/env-file': 'yes', 'ownerrefs.dev/paused': 'no' }));
    s.upsert(node({ 'ownerrefs.dev/env-file': 'true', 'ownerrefs.dev/paused': 'no' }));
    expect(events.sent.map((e) => e.message.split(' is ')[0])).toEqual(['node label ownerrefs.dev/paused="no"', 'node label ownerrefs.dev/env-file="yes"']);
  });

  it('applies new settings before the Node\'s identity and allocatable (a recreated Node renders every pod once, not twice)', () => {
    const order: string[] = [];
    let current: NodeSettings = DEFAULT_SETTINGS;
    const s = new NodeConfigSource({ current: () => current, apply: (x) => { order.push('settings'); current = x; }, events: new RecordingEvents(), log: memoryLogger().log,
      allocatable: () => order.push('allocatable'), node: () => order.push('node') });
    s.upsert(node({ 'ownerrefs.dev/env-file': 'false' }));
    expect(order).toEqual(['settings', 'allocatable', 'node']);
  });

  it('has no remove handler: a deleted Node leaves the last settings in force', () => {
    const { s } = source();
    expect('remove' in s).toBe(false);
  });
});
