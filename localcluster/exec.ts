// Runs a command in a pod's container through the API server (the exec subresource, a
// websocket), as `kubectl exec` does: how tests and the demo read files from inside a
// real container. Async on purpose: the API server reaches a real kubelet through the
// control plane's egress proxy, which lives in this process and must keep running.

import { Writable } from 'node:stream';
import { Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';

export type PodExec = (pod: { namespace: string; name: string; container: string }, command: string[]) => Promise<string>;

/** stdout of the command, or a rejection carrying its stderr and status. */
export function podExec(kc: KubeConfig): PodExec {
  const exec = new Exec(kc);
  return (pod, command) => new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const sink = (append: (s: string) => void) => new Writable({ write(chunk: Buffer, _enc, cb) { append(chunk.toString()); cb(); } });
    exec.exec(pod.namespace, pod.name, pod.container, command, sink((s) => (out += s)), sink((s) => (err += s)), null, false, (status: V1Status) => {
      if (status.status === 'Success') resolve(out);
      else reject(new Error(`exec ${command.join(' ')} in ${pod.namespace}/${pod.name}: ${status.message ?? status.status} ${err}`.trim()));
    }).catch(reject);
  });
}
