// The second mutating webhook of bench/surge.ts: a cluster's other webhook (a policy engine
// stamping a label on every pod), localcluster/testwebhook.ts's, matching every pod of the
// bench namespace, the floor's included: so the floor is the API server with that webhook,
// and "added" is ours beside it. Named to sort before ours (the API server calls mutating
// webhooks in name order, as with most such webhooks, which sort before "ownerrefs.dev"),
// it is called once per pod (its reinvocationPolicy is Never, and ours comes after it).
//
// It runs in a worker thread of the bench's process, not on its main thread: its TLS and
// JSON work would otherwise delay the open-loop sends the latencies are timed from. Its
// requests and its thread's CPU time are reported per phase.

import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { KubeConfig } from '@kubernetes/client-node';
import { pointer, startTestWebhook } from '../../localcluster/testwebhook.ts';

export const OTHER_WEBHOOK = 'bench-labeler';
const LABEL = 'bench.ownerrefs.dev/labelled';

export interface OtherStats { requests: number; cpuS: number }

export interface OtherWebhook {
  stats(): Promise<OtherStats>;
  stop(): Promise<void>;
}

interface Init { otherWebhook: true; kubeconfig: string; namespace: string }

export async function startOtherWebhook(kubeconfig: string, namespace: string): Promise<OtherWebhook> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { otherWebhook: true, kubeconfig, namespace } satisfies Init });
  const next = <T>() => new Promise<T>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    worker.once('error', onError);
    worker.once('message', (m: T) => { worker.off('error', onError); resolve(m); });
  });
  await next<'ready'>();
  return {
    stats() {
      const reply = next<OtherStats>();
      worker.postMessage('stats');
      return reply;
    },
    async stop() {
      const done = next<'stopped'>();
      worker.postMessage('stop');
      await done;
      await worker.terminate();
    },
  };
}

if (!isMainThread && (workerData as Init | undefined)?.otherWebhook) {
  const init = workerData as Init;
  const kc = new KubeConfig();
  kc.loadFromFile(init.kubeconfig);
  let requests = 0;
  const hook = await startTestWebhook(kc, {
    name: OTHER_WEBHOOK, namespace: init.namespace, operations: ['CREATE'], keepRequests: false,
    mutate: () => {
      requests++;
      return [{ op: 'add', path: `/metadata/labels/${pointer(LABEL)}`, value: 'true' }];
    },
  });
  parentPort!.postMessage('ready');
  parentPort!.on('message', (m: string) => {
    if (m === 'stats') {
      const u = process.threadCpuUsage();
      parentPort!.postMessage({ requests, cpuS: (u.user + u.system) / 1e6 } satisfies OtherStats);
    } else if (m === 'stop') {
      void hook.remove().then(() => parentPort!.postMessage('stopped'));
    }
  });
}
