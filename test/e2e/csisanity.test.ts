// csi-sanity, the Kubernetes CSI project's conformance suite, against the agent's CSI
// socket (the agent runs for real, with the control plane behind it).
//
// Skipped, because this is a node-only driver for ephemeral inline volumes:
// - "[Controller Server]" and "GroupController" specs: there is no controller service
//   (GetPluginCapabilities says so; csi-sanity still runs them unless told not to).
// - "should remove target path": it provisions its volume with the controller's
//   CreateVolume first. Our own tests cover unpublish removing the target
//   (test/agent/files/csi/driver.test.ts, test/e2e/csi.test.ts).
// Node specs that depend on capabilities we do not offer skip themselves.

import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRIVER } from '../support/csi.ts';
import { csiToolsDir } from '../support/csitools.ts';
import { useE2E } from '../support/e2e.ts';

const SKIP = ['Controller Server', 'GroupController', 'should remove target path'];
const work = mkdtempSync(path.join(os.tmpdir(), 'csi-sanity-'));
const SOCKET = path.join(work, 'plugins', DRIVER, 'csi.sock');

interface Spec {
  ContainerHierarchyTexts: string[] | null;
  LeafNodeText: string;
  State: string;
}

function run(bin: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(bin, args, { maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: stdout + stderr });
    });
  });
}

describe('csi-sanity', () => {
  const e = useE2E('csisanity', { agentArgs: [`--csi-socket=${SOCKET}`, '--registration-dir='] });
  let tools: string;
  beforeAll(async () => { tools = await csiToolsDir(); }, 300_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('passes the identity and node specs of a node-only driver', async () => {
    const report = path.join(work, 'report.json');
    mkdirSync(path.join(work, 'sanity'));
    const { code, out } = await run(path.join(tools, 'csi-sanity'), [
      `--csi.endpoint=${SOCKET}`,
      `--csi.mountdir=${path.join(work, 'sanity', 'mount')}`,
      `--csi.stagingdir=${path.join(work, 'sanity', 'staging')}`,
      `--ginkgo.skip=${SKIP.join('|')}`,
      `--ginkgo.json-report=${report}`,
      '--ginkgo.no-color',
    ]);
    const specs = (JSON.parse(readFileSync(report, 'utf8')) as { SpecReports: Spec[] }[])
      .flatMap((r) => r.SpecReports)
      .filter((s) => s.LeafNodeText !== '')
      .map((s) => ({ name: [...s.ContainerHierarchyTexts ?? [], s.LeafNodeText].join(' '), state: s.State }));
    const by = (state: string) => specs.filter((s) => s.state === state).map((s) => s.name);
    const summary = `${by('passed').length} passed, ${by('failed').length} failed, ${by('skipped').length} skipped`;
    process.stderr.write(`csi-sanity: ${summary}\n`);

    expect(by('failed'), out.slice(-6000)).toEqual([]);
    expect(code, out.slice(-3000)).toBe(0);
    // The specs that must have run and passed, not merely "nothing failed".
    expect(by('passed')).toEqual(expect.arrayContaining([
      'Identity Service GetPluginCapabilities should return appropriate capabilities',
      'Identity Service Probe should return appropriate information',
      'Identity Service GetPluginInfo should return appropriate information',
      'Node Service NodeGetCapabilities should return appropriate capabilities',
      'Node Service NodeGetInfo should return appropriate values',
      'Node Service NodePublishVolume should fail when no volume id is provided',
      'Node Service NodePublishVolume should fail when no target path is provided',
      'Node Service NodePublishVolume should fail when no volume capability is provided',
      'Node Service NodeUnpublishVolume should fail when no volume id is provided',
      'Node Service NodeUnpublishVolume should fail when no target path is provided',
    ]));
    // Every spec outside the controller ones either passed or skipped itself for a capability we do not offer.
    expect(specs.filter((s) => !SKIP.some((k) => s.name.includes(k)) && s.state !== 'passed' && s.state !== 'skipped')).toEqual([]);
    expect((await e.agent.get('/readyz')).status).toBe(200);
  });
});
