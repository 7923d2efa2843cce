// Scenario 5: node labels reconfigure the agent live.
import { describe, expect, it } from 'vitest';
import { items, podinfoDaemonSet, useE2E } from '../support/e2e.ts';
import { mergePatch } from '../../localcluster/patch.ts';
import { waitFor } from '../../localcluster/wait.ts';

describe('node labels', () => {
  const e = useE2E('labels');
  const label = (labels: Record<string, string | null>) =>
    e.core.patchNode({ name: e.nodeName, body: { metadata: { labels } } }, mergePatch);
  const reset = () => label({ 'ownerrefs.dev/paused': null, 'ownerrefs.dev/env-file': null, 'ownerrefs.dev/dependents-file': null });

  it('pause holds files as they are; env and dependents files turn off and on', async () => {
    try {
      const ds = await e.apps.createNamespacedDaemonSet({ namespace: e.ns, body: podinfoDaemonSet('cfg') });
      const pod = await waitFor(async () => (await e.core.listNamespacedPod({ namespace: e.ns, labelSelector: 'app=cfg' })).items[0],
        { describe: 'the DaemonSet pod' });
      const named = (t: string) => items(t)[0]?.uid === ds.metadata!.uid;
      await e.waitForFile(pod, named, 'names the DaemonSet');

      // Paused: the agent still sees the orphaning but must not write it.
      await label({ 'ownerrefs.dev/paused': 'true' });
      await waitFor(() => e.agent.lines.some((l) => l.msg === 'node settings changed' && (l.settings as { paused: boolean }).paused),
        { describe: 'agent applies paused=true' });
      const skips = () => e.agent.lines.filter((l) => l.msg === 'paused: not writing' && l.podUID === pod.metadata!.uid).length;
      const before = skips();
      await e.core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns, body: { metadata: { labels: { app: 'away' } } } }, mergePatch);
      await waitFor(async () => (await e.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: e.ns })).metadata!.ownerReferences === undefined,
        { describe: 'controller orphans the pod' });
      await waitFor(() => skips() > before, { describe: 'agent processes the orphaning while paused' });
      expect(named(e.file(pod)!)).toBe(true); // unchanged while paused

      // Resumed: it catches up.
      await label({ 'ownerrefs.dev/paused': null });
      await e.waitForFile(pod, (t) => items(t).length === 0, 'items:[] after resuming');

      await label({ 'ownerrefs.dev/env-file': 'false', 'ownerrefs.dev/dependents-file': 'false' });
      await waitFor(() => e.file(pod, 'ownerReferences.env') === undefined && e.file(pod, 'dependentOwnerReferences') === undefined,
        { describe: 'env and dependents files removed' });
      expect(e.file(pod)).toBeDefined();
      await label({ 'ownerrefs.dev/env-file': 'true' });
      await e.waitForFile(pod, (t) => t.startsWith("OWNER_REFERENCES='"), 'env file back', 'ownerReferences.env');
      expect(e.file(pod, 'dependentOwnerReferences')).toBeUndefined();
    } finally {
      await reset();
    }
  });

  it('warns on the Node about an invalid value and keeps the last good setting', async () => {
    try {
      await label({ 'ownerrefs.dev/env-file': 'false' });
      await waitFor(() => e.agent.lines.some((l) => l.msg === 'node settings changed' && (l.settings as { envFile: boolean }).envFile === false),
        { describe: 'env-file=false applied' });
      await label({ 'ownerrefs.dev/env-file': 'maybe' });
      const ev = await waitFor(async () => (await e.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${e.nodeName}` }))
        .items.find((x) => x.reason === 'OwnerRefsInvalidNodeLabel' && x.message?.includes('"maybe"')),
      { describe: 'Warning Event on the Node' });
      expect(ev.type).toBe('Warning');
      expect(ev.involvedObject.kind).toBe('Node');
      expect(ev.message).toMatch(/use "true" or "false"; keeping ownerrefs.dev\/env-file=false/);
    } finally {
      await reset();
    }
  });
});
