// The Go side of the CSI tests: csi-sanity and kubeletcsi, built (or found in the
// cache) by localcluster/csi/build.sh, the same script .ci/run calls.

import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { podInfo, type PodRef } from './csi.ts';

const run = promisify(execFile);
const BUILD = path.join(import.meta.dirname, '..', '..', 'localcluster', 'csi', 'build.sh');

let built: Promise<string> | undefined;

/** Directory holding csi-sanity and kubeletcsi; builds once per test process on a cache miss. */
export function csiToolsDir(): Promise<string> {
  built ??= run('bash', [BUILD], { maxBuffer: 1 << 20 }).then(({ stdout }) => stdout.trim().split('\n').pop() ?? '');
  return built;
}

export interface KubeletCall {
  code: string;
  message: string;
  [k: string]: unknown;
}

async function kubeletcsi(args: string[]): Promise<KubeletCall> {
  const { stdout } = await run(path.join(await csiToolsDir(), 'kubeletcsi'), args);
  return JSON.parse(stdout) as KubeletCall;
}

/** NodePublishVolume as the kubelet sends it for an inline volume of a pod. */
export function kubeletPublish(socket: string, req: { volumeId: string; targetPath: string; readonly: boolean }, pod: PodRef): Promise<KubeletCall> {
  const ctx = Object.entries(podInfo(pod)).flatMap(([k, v]) => ['-ctx', `${k}=${v}`]);
  return kubeletcsi(['publish', '-endpoint', socket, '-volume-id', req.volumeId, '-target', req.targetPath,
    ...(req.readonly ? ['-readonly'] : []), ...ctx]);
}

export function kubeletUnpublish(socket: string, req: { volumeId: string; targetPath: string }): Promise<KubeletCall> {
  return kubeletcsi(['unpublish', '-endpoint', socket, '-volume-id', req.volumeId, '-target', req.targetPath]);
}

/** The kubelet's plugin watcher meeting a new registration socket. */
export function kubeletRegister(registrationSocket: string): Promise<KubeletCall> {
  return kubeletcsi(['register', '-registration', registrationSocket]);
}
