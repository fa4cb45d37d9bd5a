import { createServer, type Server, type Socket } from 'node:net';

/**
 * A fake PostgreSQL on 127.0.0.1:`port` (0: any): it answers every startup message with the authentication request
 * `auth` (3: the password in clear, 5: MD5, with the salt "salt") and keeps each password message a client sends,
 * then drops the connection. What a local process holding the embedded cluster's port would see of the gateway.
 */
export async function fakePostgres(auth: 3 | 5, port = 0): Promise<{ server: Server; port: number; received: string[] }> {
  const received: string[] = [];
  const server = createServer((sock: Socket) => {
    let buf = Buffer.alloc(0);
    let started = false;
    sock.on('error', () => undefined);
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      if (!started && buf.length >= 4 && buf.length >= buf.readInt32BE(0)) {
        buf = buf.subarray(buf.readInt32BE(0));
        started = true;
        const r = Buffer.alloc(auth === 5 ? 13 : 9);
        r.write('R', 0);
        r.writeInt32BE(auth === 5 ? 12 : 8, 1);
        r.writeInt32BE(auth, 5);
        if (auth === 5) r.write('salt', 9);
        sock.write(r);
      }
      if (started && buf.length >= 5 && buf[0] === 0x70 /* 'p' */ && buf.length >= 1 + buf.readInt32BE(1)) {
        received.push(buf.subarray(5, 1 + buf.readInt32BE(1)).toString('utf8').replace(/\0$/, ''));
        sock.destroy();
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return { server, port: (server.address() as { port: number }).port, received };
}
