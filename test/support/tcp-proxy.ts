import net from 'node:net';

/**
 * A TCP proxy to a real server (the test's PostgreSQL) that can play a network
 * partition: while blackholed nothing is delivered in either direction and
 * sockets stay open — no RST, no FIN, just silence, as when a route
 * disappears. Bytes are held, not lost (TCP retransmits them), and delivered
 * in order when the partition heals. New connections are accepted and then
 * hear nothing.
 */
export interface TcpProxy {
  port: number;
  blackhole(on: boolean): void;
  close(): Promise<void>;
}

interface Link {
  to: net.Socket;
  held: Buffer[];
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let silent = false;
  const sockets = new Set<net.Socket>();
  const links = new Set<Link>();
  const forward = (from: net.Socket, to: net.Socket): void => {
    const link: Link = { to, held: [] };
    links.add(link);
    from.on('data', (chunk: Buffer) => {
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
    forward(client, upstream);
    forward(upstream, client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
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
