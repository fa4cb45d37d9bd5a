/**
 * The benchmark's calibration point: the "minimal server doing just the
 * two durable commits per call". Plain node:http and a pg pool, no framework, no
 * governance, no vendor call: per request it reads the JSON body, INSERTs an
 * intent row (one commit), UPDATEs it to its outcome (a second commit) and
 * answers 200 with a small JSON body.
 *
 * Run by the benchmark as its own process on the benchmark's database (its own
 * table, created here), so the same machine, PostgreSQL and load generator give
 * the ceiling an allowed call through the gateway is measured against.
 *
 * Env: DATABASE_URL (required), DB_POOL_SIZE (default 20).
 * Prints "listening on http://127.0.0.1:<port>" when ready.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';

const url = process.env.DATABASE_URL;
if (!url) {
  process.stderr.write('reference server: DATABASE_URL is required\n');
  process.exit(1);
}
const pool = new pg.Pool({ connectionString: url, max: Number(process.env.DB_POOL_SIZE ?? 20) });
pool.on('error', () => undefined);

await pool.query(`CREATE TABLE IF NOT EXISTS bench_reference_calls (
  id uuid PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE,
  body jsonb NOT NULL,
  status text NOT NULL,
  result jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz
)`);

const reply = (res: http.ServerResponse, status: number, body: string): void => {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    void (async () => {
      let body: { id?: unknown };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown };
      } catch {
        reply(res, 400, '{"code":"VALIDATION_ERROR"}');
        return;
      }
      const id = randomUUID();
      const key = typeof body.id === 'string' ? body.id : id;
      try {
        await pool.query('INSERT INTO bench_reference_calls (id, idempotency_key, body, status) VALUES ($1, $2, $3, $4)', [id, key, body, 'running']);
        await pool.query('UPDATE bench_reference_calls SET status = $2, result = $3, updated_at = now() WHERE id = $1', [id, 'succeeded', { ok: true }]);
        reply(res, 200, JSON.stringify({ id, status: 'succeeded' }));
      } catch {
        reply(res, 503, '{"code":"DATABASE_UNAVAILABLE"}');
      }
    })();
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  if (addr && typeof addr === 'object') process.stdout.write(`listening on http://127.0.0.1:${addr.port}\n`);
});
const stop = (): void => {
  server.close();
  server.closeAllConnections();
  void pool.end().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
