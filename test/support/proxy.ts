// A loopback TCP proxy between the agent and the API server, for fault injection.
// TLS passes through untouched (the serving cert is for 127.0.0.1, any port).

import net from 'node:net';

export interface FaultProxy {
  /** host:port to put in the agent's kubeconfig. */
  readonly address: string;
  /** Connections accepted so far (a reconnect storm shows here). */
  readonly connections: number;
  /** Connections currently forwarded. */
  readonly open: number;
  /**
   * Stop forwarding on every open connection without closing it: the peer sees a
   * healthy TCP connection that never delivers another byte. New connections still work.
   */
  blackhole(): number;
  close(): Promise<void>;
}

export async function startFaultProxy(upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<FaultProxy> {
  const open = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(upstreamPort, upstreamHost);
    const pair = { client, upstream };
    open.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    get connections() {
      return connections;
    },
    get open() {
      return open.size;
    },
    blackhole() {
      for (const { client, upstream } of open) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
      const n = open.size;
      open.clear(); // forgotten, never closed by us: only the agent can give up on them
      return n;
    },
    async close() {
      server.close();
      for (const { client, upstream } of open) {
        client.destroy();
        upstream.destroy();
      }
    },
  };
}
