// `kubectl ownerrefs` as a user runs it: kubectl (the one built with the control plane) finds
// the plugin file on PATH, with the test cluster's kubeconfig.

import { execFile } from 'node:child_process';
import path from 'node:path';
import { controlPlaneBinaries } from '../../localcluster/controlplane/controlplane.ts';

const PLUGIN_DIR = path.join(import.meta.dirname, '..', '..', 'kubectl-plugin');

export interface PluginRun { status: number; stdout: string; stderr: string }

/** A runner of `kubectl ownerrefs ARGS...` against `kubeconfig`; it never throws, a failure is its status. */
export async function kubectlOwnerrefs(kubeconfig: string): Promise<(...args: string[]) => Promise<PluginRun>> {
  const bin = await controlPlaneBinaries();
  // Asynchronous: exec and logs reach the kubelet through the control plane's egress proxy, which runs in this process.
  return (...args) => new Promise((resolve) => {
    execFile('kubectl', ['ownerrefs', ...args], { env: { ...process.env, PATH: `${PLUGIN_DIR}:${bin}:${process.env.PATH}`, KUBECONFIG: kubeconfig } },
      (err, stdout, stderr) => resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}
