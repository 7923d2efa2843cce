// The API server's way to the real kubelets of localcluster/node, which listen on
// 127.0.0.1 only (no test traffic may go to any other address). An HTTP CONNECT proxy
// on a unix socket, named in the API server's EgressSelectorConfiguration for the
// "cluster" egress: the API server asks it for <node IP>:<kubelet port> (exec, logs,
// port-forward), and it connects to 127.0.0.1 at that port instead. The mechanism is
// the one the Konnectivity proxy uses on clusters whose nodes the API server cannot
// reach directly. A pod's IP (in POD_NETWORK, on a real node's bridge: a webhook's
// Service endpoint) is connected to as asked: the bridge is local to this host.

import { rm } from 'node:fs/promises';
import net from 'node:net';

export interface EgressProxy {
  readonly socket: string;
  close(): Promise<void>;
}

const MAX_HEAD = 8 * 1024;
/** The real nodes' pod subnets, 10.244.N.0/24 (localcluster/node/realnode.ts). */
const POD_NETWORK = /^10\.244\.\d{1,3}\.\d{1,3}$/;

export async function startEgressProxy(socket: string): Promise<EgressProxy> {
  await rm(socket, { force: true });
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    open.add(client);
    client.once('close', () => open.delete(client));
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEAD) client.destroy();
        return;
      }
      client.off('data', onData);
      const m = /^CONNECT ([^\s:]+):(\d+) HTTP\/1\.[01]\r\n/.exec(head.subarray(0, end).toString('latin1'));
      if (!m) {
        client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
        return;
      }
      let established = false;
      const upstream = net.connect(Number(m[2]), POD_NETWORK.test(m[1]!) ? m[1] : '127.0.0.1', () => {
        established = true;
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        const rest = head.subarray(end + 4);
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream).pipe(client);
      });
      open.add(upstream);
      upstream.once('close', () => { open.delete(upstream); client.destroy(); });
      // Once the tunnel carries TLS, an answer of ours would be read as the peer's: only close.
      upstream.once('error', () => (established ? client.destroy() : client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n')));
      client.once('error', () => upstream.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(socket, resolve));
  return {
    socket,
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
