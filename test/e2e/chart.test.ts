// Every rendering of the Helm chart's value matrix is accepted by the real API server
// (server-side dry-run apply, object by object). The plain manifests are renderings too
// (test/packaging/chart.test.ts), and every e2e file runs the agent with daemonset.yaml's
// RBAC: the RBAC the tests exercise is the RBAC users get.

import { beforeAll, describe, expect, it } from 'vitest';
import { apply } from '../../localcluster/agentproc.ts';
import { helmBin } from '../../scripts/gen-manifests.ts';
import { kubeConfig } from '../support/cluster.ts';
import { renderMatrix } from '../support/chart.ts';

describe('the Helm chart against the API server', () => {
  let renderings: ReturnType<typeof renderMatrix>;
  beforeAll(() => { renderings = renderMatrix(helmBin()); }, 600_000);

  it('every rendering of the value matrix passes a server-side dry-run apply', async () => {
    const kc = kubeConfig();
    // Namespaced objects need their namespace to exist, even in a dry run: made for real once
    // (the defaults' Namespace), so the file passes alone and not only after a test that made it.
    await apply(kc, renderings[0]![1].filter((o) => o.kind === 'Namespace'));
    for (const [name, objs] of renderings) {
      // The Namespace itself is dry-run like the rest.
      const applied = await apply(kc, objs, true).catch((err: unknown) => { throw new Error(`${name}: ${String(err)}`); });
      expect({ name, count: applied.length }).toEqual({ name, count: objs.length });
    }
  });
});
