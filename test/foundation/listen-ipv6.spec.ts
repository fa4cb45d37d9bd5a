/**
 * HOST as an IPv6 address (README: PORT / HOST): the gateway listens there, and its "listening on" line, which people
 * and tools (gateway-process.ts, the bench) read as a URL, brackets the address. An IPv6 DATABASE_URL connects.
 */
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';

/** A raw GET over a chosen address (fetch would need a URL; this checks the socket itself). */
function getHealth(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, host, () => s.end(`GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    let buf = '';
    s.setEncoding('utf8').on('data', (c: string) => (buf += c));
    s.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(buf)?.[1] ?? 0)));
    s.on('error', reject);
  });
}

/** A TCP relay listening on [::1] to the test PostgreSQL (which listens on 127.0.0.1 only). */
async function v6Relay(targetHost: string, targetPort: number): Promise<{ port: number; close(): void }> {
  const socks = new Set<net.Socket>();
  const server = net.createServer((c) => {
    const u = net.connect(targetPort, targetHost);
    for (const s of [c, u]) {
      socks.add(s);
      s.on('error', () => s.destroy());
    }
    c.pipe(u).pipe(c);
  });
  await new Promise<void>((r) => server.listen(0, '::1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of socks) s.destroy();
      server.close();
    },
  };
}

const started: GatewayProcess[] = [];
afterAll(async () => {
  for (const g of started) await g.stop();
});

describe('HOST=:: and HOST=::1 (README: PORT / HOST)', () => {
  it('HOST=::1: the gateway listens, and the "listening on" line is a URL that reaches it', async () => {
    const gw = await startGatewayProcess({ HOST: '::1' });
    started.push(gw);
    const port = Number(/:(\d+) \(docs/.exec(gw.output())?.[1]);
    expect(await getHealth('::1', port)).toBe(200); // it does listen on ::1
    // The line is read by people and tooling (gateway-process.ts, bench) as a URL: it must be one.
    const line = /listening on (\S+)/.exec(gw.output())![1];
    expect(line).toBe(`http://[::1]:${port}`);
    expect(() => new URL(line)).not.toThrow();
  });

  it('HOST=::: dual-stack, IPv4 and IPv6 clients both reach it; the line is a URL', async () => {
    const gw = await startGatewayProcess({ HOST: '::' });
    started.push(gw);
    const port = Number(/:(\d+) \(docs/.exec(gw.output())?.[1]);
    expect(await getHealth('127.0.0.1', port)).toBe(200);
    expect(await getHealth('::1', port)).toBe(200);
    const line = /listening on (\S+)/.exec(gw.output())![1];
    expect(line).toBe(`http://[::]:${port}`);
  });

  it('DATABASE_URL with a bracketed IPv6 host ([::1]) connects', async () => {
    const relay = await v6Relay('127.0.0.1', Number(new URL(process.env.DATABASE_URL!).port || 5432));
    try {
      const u = new URL(process.env.DATABASE_URL!);
      u.hostname = '[::1]';
      u.port = String(relay.port);
      const gw = await startGatewayProcess({ DATABASE_URL: u.toString() });
      started.push(gw);
      const port = Number(/:(\d+) \(docs/.exec(gw.output())?.[1]);
      expect(await getHealth('127.0.0.1', port)).toBe(200);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
      await gw.stop();
      started.pop();
    } finally {
      relay.close();
    }
  });
});
