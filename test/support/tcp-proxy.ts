import net from 'node:net';

/**
 * A TCP proxy to a real server (the test's PostgreSQL) that can play a network
 * partition: while blackholed nothing is delivered in either direction and
 * sockets stay open — no RST, no FIN, just silence, as when a route
 * disappears. Bytes are held, not lost (TCP retransmits them), and delivered
 * in order when the partition heals. New connections are accepted and then
 * hear nothing.
 *
 * The partition can also be started by the traffic itself (stallOn): the proxy
 * goes silent as the first client→server chunk containing a chosen text
 * passes, and holds that chunk. So a test can cut the network in the middle of
 * a transaction, after its BEGIN, with exactly the statement it chose in flight.
 */
export interface TcpProxy {
  port: number;
  blackhole(on: boolean): void;
  /** Goes silent when a client→server chunk contains `trigger` (once). */
  stallOn(trigger: string): void;
  silent(): boolean;
  close(): Promise<void>;
}

interface Link {
  to: net.Socket;
  held: Buffer[];
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let silent = false;
  let trigger: string | null = null;
  const sockets = new Set<net.Socket>();
  const links = new Set<Link>();
  const forward = (from: net.Socket, to: net.Socket, upstream: boolean): void => {
    const link: Link = { to, held: [] };
    links.add(link);
    from.on('data', (chunk: Buffer) => {
      if (upstream && trigger !== null && chunk.includes(trigger)) {
        trigger = null;
        silent = true;
      }
      if (silent) link.held.push(chunk);
      else to.write(chunk);
    });
    from.on('close', () => links.delete(link));
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    forward(client, upstream, true);
    forward(upstream, client, false);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    stallOn(t) {
      trigger = t;
    },
    silent: () => silent,
    blackhole(on: boolean) {
      silent = on;
      if (on) return;
      for (const link of links) {
        for (const chunk of link.held.splice(0)) if (!link.to.destroyed) link.to.write(chunk);
      }
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** DATABASE_URL, through `proxy`. */
export function viaProxy(proxy: { port: number }, url = process.env.DATABASE_URL!): string {
  const via = new URL(url);
  via.hostname = '127.0.0.1';
  via.port = String(proxy.port);
  return via.toString();
}
