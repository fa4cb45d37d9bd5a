import net from 'node:net';

/**
 * A stand-in for a connection pooler in front of the test's PostgreSQL, as poolers treat the startup parameters a
 * client sends (the user, the database and the rest; `known`: by default KNOWN_STARTUP_PARAMETERS):
 * - `refuse`: one not in `known` is answered with an ErrorResponse (08P01 "unsupported startup parameter: <name>")
 *   and the connection closed, as PgBouncer does for a parameter it does not track, and as AWS RDS Proxy and
 *   Neon's pooler refuse `options`; a startup without one is passed on unchanged;
 * - `drop`: only the `known` ones are passed on, the rest dropped without a word, as Supabase's Supavisor opens
 *   its server connections.
 * After the startup packet the bytes are passed on both ways. `seen` holds the parameter names of every startup;
 * `namedStatements` the names of the statements clients prepared by name (Parse messages with a name), which a
 * transaction-mode pool cannot keep: the next transaction may run on another server connection.
 */
export interface StartupFilterProxy {
  url: string;
  seen: string[][];
  namedStatements: Set<string>;
  close(): Promise<void>;
}

/** What PgBouncer tracks of what the driver sends (it always sends client_encoding), and RDS Proxy takes. */
export const KNOWN_STARTUP_PARAMETERS = ['user', 'database', 'application_name', 'client_encoding'];

function refusal(name: string): Buffer {
  const body = Buffer.from(`SFATAL\0VFATAL\0C08P01\0Munsupported startup parameter: ${name}\0\0`);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** `databaseUrl` through the proxy: same credentials and database, the proxy's host and port. */
export async function startStartupFilterProxy(databaseUrl: string, mode: 'refuse' | 'drop', known: readonly string[] = KNOWN_STARTUP_PARAMETERS): Promise<StartupFilterProxy> {
  const target = new URL(databaseUrl);
  const seen: string[][] = [];
  const namedStatements = new Set<string>();
  const sockets = new Set<net.Socket>();
  const front = net.createServer((c) => {
    sockets.add(c);
    c.on('error', () => undefined);
    c.once('data', (packet: Buffer) => {
      const fields = packet.subarray(8).toString('utf8').split('\0');
      const pairs: [string, string][] = [];
      for (let i = 0; i + 1 < fields.length && fields[i] !== ''; i += 2) pairs.push([fields[i], fields[i + 1]]);
      seen.push(pairs.map(([k]) => k));
      const unknown = pairs.find(([k]) => !known.includes(k));
      if (mode === 'refuse' && unknown) return void c.end(refusal(unknown[0]));
      const kept = mode === 'drop' ? pairs.filter(([k]) => known.includes(k)) : pairs;
      const body = Buffer.concat([packet.subarray(4, 8), Buffer.from(`${kept.flat().join('\0')}\0\0`)]);
      const len = Buffer.alloc(4);
      len.writeInt32BE(body.length + 4);
      const to = net.connect(Number(target.port || 5432), target.hostname, () => to.write(Buffer.concat([len, body])));
      sockets.add(to);
      to.on('error', () => c.destroy());
      c.on('close', () => to.destroy());
      to.on('close', () => c.destroy());
      // Client messages: a type byte, then a length that counts itself and the body. A Parse body starts with the
      // statement's name (empty: unnamed).
      let pending = Buffer.alloc(0);
      c.on('data', (chunk: Buffer) => {
        to.write(chunk);
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 5 && pending.length >= 1 + pending.readInt32BE(1)) {
          const end = 1 + pending.readInt32BE(1);
          if (pending[0] === 0x50) {
            const name = pending.subarray(5, pending.indexOf(0, 5)).toString('utf8');
            if (name !== '') namedStatements.add(name);
          }
          pending = pending.subarray(end);
        }
      });
      to.pipe(c);
    });
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  const via = new URL(databaseUrl);
  via.hostname = '127.0.0.1';
  via.port = String((front.address() as net.AddressInfo).port);
  return {
    url: via.toString(),
    seen,
    namedStatements,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => front.close(() => r()));
    },
  };
}
