// Vitest global setup for the e2e project: one real control plane per run,
// shared by every e2e test file (files run one at a time).
import { rm } from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import {
  controlPlaneBinaries, newWorkDir, reapLeftoverControlPlanes, startControlPlane, type ControlPlane,
} from '../localcluster/controlplane/controlplane.ts';

export const TEST_NODE_NAME = 'ownerrefs-test-node';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfigPath: string;
    server: string;
    caPath: string;
    nodeName: string;
    workDir: string;
    logsDir: string;
    components: { controllerManager: boolean; scheduler: boolean };
    // Lets a test file start a private control plane (e.g. to restart it).
    binDir: string;
  }
}

let cp: ControlPlane | undefined;

export async function setup(project: TestProject): Promise<void> {
  await reapLeftoverControlPlanes();
  const binDir = await controlPlaneBinaries();
  const workDir = await newWorkDir();
  cp = await startControlPlane({ binDir, workDir, nodeName: TEST_NODE_NAME });
  project.provide('kubeconfigPath', cp.kubeconfigPath);
  project.provide('server', cp.server);
  project.provide('caPath', cp.caPath);
  project.provide('nodeName', TEST_NODE_NAME);
  project.provide('workDir', cp.workDir);
  project.provide('logsDir', cp.logsDir);
  project.provide('components', cp.components);
  project.provide('binDir', binDir);
}

export async function teardown(): Promise<void> {
  if (!cp) return;
  await cp.stop();
  // OWNERREFS_CP_KEEP=1 keeps logs and etcd data for a post-mortem.
  if (!process.env.OWNERREFS_CP_KEEP) await rm(cp.workDir, { recursive: true, force: true });
  else process.stderr.write(`control plane workDir kept: ${cp.workDir}\n`);
  cp = undefined;
}
