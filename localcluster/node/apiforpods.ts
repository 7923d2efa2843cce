// The real node's stand-in for the `kubernetes` Service, for pods on the pod network (a
// webhook's replicas): the API server listens on 127.0.0.1 only, which a pod's own network
// namespace cannot reach. What kube-proxy gives a pod at the Service's ClusterIP, a TCP
// relay gives it here at the node bridge's gateway address, port 443; TLS passes through,
// and the serving certificate carries the name kubernetes.default.svc, which a pod maps to
// that address with hostAliases (see `podPatch`).

import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ApiForPods {
  /** What a pod on the bridge needs to use its in-cluster configuration (hostAliases and env). */
  podPatch(): { hostAliases: { ip: string; hostnames: string[] }[]; env: { name: string; value: string }[] };
  close(): Promise<void>;
}

/**
 * Makes the node's bridge with its gateway address now (the CNI bridge plugin adopts it at
 * the first pod), and relays connections to it on 443 to the API server at `server`.
 */
export async function startApiForPods(bridge: string, subnet: string, server: string): Promise<ApiForPods> {
  const ip = subnet.replace(/\.0\/24$/, '.1');
  await run('ip', ['link', 'add', 'name', bridge, 'type', 'bridge']).catch(() => undefined); // a restarted node's is there already
  await run('ip', ['addr', 'replace', `${ip}/24`, 'dev', bridge]);
  await run('ip', ['link', 'set', bridge, 'up']);
  const upstream = new URL(server);
  const open = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const to = net.connect(Number(upstream.port), upstream.hostname);
    for (const s of [client, to]) {
      open.add(s);
      s.once('close', () => open.delete(s));
    }
    client.once('error', () => to.destroy());
    to.once('error', () => client.destroy());
    client.pipe(to).pipe(client);
  });
  const port = 443;
  await new Promise<void>((resolve, reject) => relay.once('error', reject).listen(port, ip, resolve));
  return {
    podPatch: () => ({
      hostAliases: [{ ip, hostnames: ['kubernetes.default.svc'] }],
      env: [{ name: 'KUBERNETES_SERVICE_HOST', value: 'kubernetes.default.svc' }, { name: 'KUBERNETES_SERVICE_PORT', value: String(port) }],
    }),
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => relay.close(() => r()));
    },
  };
}
