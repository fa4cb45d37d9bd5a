import net from 'node:net';

/**
 * A TCP proxy to a real server (the test's PostgreSQL) that can play a network
 * partition: while blackholed, bytes are swallowed in both directions and
 * sockets stay open — no RST, no FIN, just silence, as when a host freezes or
 * a route disappears. New connections are accepted and then hear nothing.
 */
export interface TcpProxy {
  port: number;
  blackhole(on: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let silent = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    client.on('data', (chunk) => void (silent || upstream.write(chunk)));
    upstream.on('data', (chunk) => void (silent || client.write(chunk)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    blackhole(on: boolean) {
      silent = on;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
