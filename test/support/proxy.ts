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
  /** Close every open connection at once, as a server that goes away does. */
  cut(): number;
  /**
   * From now on accept connections without serving them, as a kube-apiserver that is
   * starting does (its port is bound before it serves): what the client sends is kept,
   * nothing is answered. With `count`, only the next `count` new connections are held and
   * later ones are served: a load balancer that sent those to a backend still starting.
   */
  hold(count?: number): void;
  /** Serve again, and forward the held connections the clients have not given up on. */
  release(): number;
  /** Held connections now. */
  readonly held: number;
  /** Held connections the client closed before they were served. */
  readonly abandoned: number;
  close(): Promise<void>;
}

export async function startFaultProxy(upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<FaultProxy> {
  const open = new Set<{ client: net.Socket; upstream: net.Socket }>();
  const held = new Map<net.Socket, Buffer[]>();
  /** New connections still to be held (Infinity: until release()). */
  let holding = 0;
  let abandoned = 0;
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    if (holding === 0) return forward(client);
    holding--;
    const sent: Buffer[] = [];
    held.set(client, sent);
    client.on('data', (d: Buffer) => sent.push(d));
    client.on('error', () => {});
    client.on('close', () => {
      if (held.delete(client)) abandoned++;
    });
  });
  function forward(client: net.Socket, sent: Buffer[] = []): void {
    const upstream = net.connect(upstreamPort, upstreamHost);
    for (const d of sent) upstream.write(d);
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
  }
  /** Closes every forwarded connection; how many there were. */
  function cutAll(): number {
    const n = open.size;
    for (const { client, upstream } of open) {
      client.destroy();
      upstream.destroy();
    }
    open.clear();
    return n;
  }
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
    cut: cutAll,
    hold(count = Infinity) {
      holding = count;
    },
    release() {
      holding = 0;
      const waiting = [...held];
      held.clear();
      for (const [client, sent] of waiting) {
        client.removeAllListeners('data');
        forward(client, sent);
      }
      return waiting.length;
    },
    get held() {
      return held.size;
    },
    get abandoned() {
      return abandoned;
    },
    async close() {
      server.close();
      for (const client of held.keys()) client.destroy();
      held.clear();
      cutAll();
    },
  };
}
