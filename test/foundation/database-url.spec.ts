import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { databaseTarget, probeDatabase } from '../../src/db/database-probe.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { createScratchDatabase } from '../support/scratch-database.js';
import { startStartupFilterProxy } from '../support/startup-filter-proxy.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';

/**
 * The URL of the test database with another database name or port. Its credentials stay (the embedded server checks
 * the password), and must never be shown: no message may carry the URL's user:password@ part.
 */
function variant(opts: { database?: string; port?: number }): string {
  const u = new URL(process.env.DATABASE_URL!);
  if (opts.database) u.pathname = `/${opts.database}`;
  if (opts.port) {
    u.hostname = '127.0.0.1';
    u.port = String(opts.port);
  }
  return u.toString();
}

const quick = (waits: string[]) => ({ budgetMs: 600, intervalMs: 150, onWait: (l: string) => waits.push(l), stopped: () => false });

describe('reaching the database DATABASE_URL names, before start-up', () => {
  it('connects: no problem', async () => {
    expect(await probeDatabase(process.env.DATABASE_URL!, quick([]))).toBeNull();
  });

  it('a database that does not exist is a problem at once (no waiting), naming DATABASE_URL and the target, not the password', async () => {
    const waits: string[] = [];
    const url = variant({ database: 'no_such_database_x1' });
    const problem = await probeDatabase(url, quick(waits));
    expect(problem).toMatch(/^cannot connect to the database in DATABASE_URL \(.+:\d+\/no_such_database_x1\): .*does not exist.*\(3D000\)$/);
    expect(waits).toEqual([]);
    expect(problem).not.toContain('@');
  });

  it('an SSL file the driver cannot read as it builds the client (gone since start-up was judged) is a problem, not a throw', async () => {
    const u = new URL(process.env.DATABASE_URL!);
    u.searchParams.set('sslmode', 'verify-full');
    u.searchParams.set('sslrootcert', '/nonexistent/tool-gateway-ca.pem');
    const waits: string[] = [];
    const problem = await probeDatabase(u.toString(), quick(waits));
    expect(problem).toMatch(/^cannot connect to the database in DATABASE_URL \(.+\): ENOENT$/);
    expect(waits).toEqual([]);
  });

  it('nothing listening: waited for, a line per attempt, then the problem', async () => {
    const waits: string[] = [];
    const problem = await probeDatabase(variant({ port: 1 }), quick(waits));
    expect(problem).toBe('cannot connect to the database in DATABASE_URL (127.0.0.1:1/' + new URL(process.env.DATABASE_URL!).pathname.slice(1) + '): ECONNREFUSED');
    expect(waits.length).toBeGreaterThanOrEqual(1);
    expect(waits.every((l) => l.endsWith('; trying again'))).toBe(true);
    expect(waits.join('\n')).not.toContain('@');
  });

  it('an endpoint that accepts and closes connections (a port proxy whose server is not up yet) is waited for; it connects once the server is', async () => {
    const db = new URL(process.env.DATABASE_URL!);
    let up = false;
    const sockets = new Set<net.Socket>();
    const front = net.createServer((c) => {
      sockets.add(c);
      if (!up) return void c.end();
      const to = net.connect(Number(db.port || 5432), db.hostname);
      sockets.add(to);
      c.pipe(to).pipe(c);
      c.on('error', () => to.destroy());
      to.on('error', () => c.destroy());
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    try {
      const port = (front.address() as net.AddressInfo).port;
      const waits: string[] = [];
      const problem = await probeDatabase(variant({ port }), { ...quick(waits), budgetMs: 10_000, onWait: (l) => ((up = true), waits.push(l)) });
      expect(problem).toBeNull();
      expect(waits).toEqual([`cannot connect to the database in DATABASE_URL (127.0.0.1:${port}${db.pathname}): Connection terminated unexpectedly; trying again`]);
    } finally {
      for (const s of sockets) s.destroy();
      front.close();
    }
  });

  it('a pooler refusing a startup parameter the pools send (PgBouncer: 08P01) is a problem at once, pointing to the README', async () => {
    // Speaks as PgBouncer does to a startup packet with a parameter it does not track: one ErrorResponse, then closes.
    // The probe connects with the pools' own parameters (before: without them, so it passed, and the framework's ten
    // retries with stack traces followed over 29 s before the same refusal ended start-up).
    const front = await startStartupFilterProxy(process.env.DATABASE_URL!, 'refuse');
    try {
      const port = new URL(front.url).port;
      const waits: string[] = [];
      const problem = await probeDatabase(front.url, { ...quick(waits), queryTimeoutMs: 20_000 });
      expect(front.seen[0]).toEqual(expect.arrayContaining(['statement_timeout', 'idle_in_transaction_session_timeout', 'options']));
      expect(problem).toBe(
        `cannot connect to the database in DATABASE_URL (127.0.0.1:${port}${new URL(front.url).pathname}): unsupported startup parameter: statement_timeout (08P01); ` +
          'behind a connection pooler, set DB_CONNECTION_MODE=pooled: see README "Running against your own PostgreSQL"',
      );
      expect(waits).toEqual([]);
    } finally {
      await front.close();
    }
  });

  it('a pooler that accepts the startup options and drops them (Supavisor): the database\'s own settings are a problem at once, with the role settings that fix them', async () => {
    const db = await createScratchDatabase('tg_probe_dropped');
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`ALTER DATABASE ${new URL(db.url).pathname.slice(1)} SET DateStyle = 'SQL, DMY'`);
    await admin.query(`ALTER DATABASE ${new URL(db.url).pathname.slice(1)} SET default_transaction_isolation = 'serializable'`);
    await admin.end();
    const front = await startStartupFilterProxy(db.url, 'drop');
    try {
      const waits: string[] = [];
      const problem = await probeDatabase(front.url, { ...quick(waits), queryTimeoutMs: 20_000 });
      expect(problem).toBe(
        'the database sessions do not have the settings the gateway sends at connect (DateStyle is "SQL, DMY", not ISO; default_transaction_isolation ' +
          'is "serializable", not read committed; statement_timeout is 0 (none); idle_in_transaction_session_timeout is 0 (none)): something between ' +
          "the gateway and PostgreSQL dropped them (a connection pooler? then set DB_CONNECTION_MODE=pooled). Set them on the gateway's role, connected as that role: " +
          "ALTER ROLE CURRENT_USER SET DateStyle = 'ISO'; ALTER ROLE CURRENT_USER SET default_transaction_isolation = 'read committed'; " +
          "ALTER ROLE CURRENT_USER SET statement_timeout = '15000ms'; ALTER ROLE CURRENT_USER SET idle_in_transaction_session_timeout = '20000ms'; " +
          'Then have any pooler in between open new server connections (PgBouncer: RECONNECT on its admin console, or a restart; RELOAD keeps the ones it has); see README "Running against your own PostgreSQL"',
      );
      expect(waits).toEqual([]);
      // Straight to the server, the options reach it: no problem.
      expect(await probeDatabase(db.url, quick([]))).toBeNull();
    } finally {
      await front.close();
      await db.drop();
    }
  });

  it('an SSL mode the server does not speak is a problem at once, saying so', async () => {
    const u = new URL(process.env.DATABASE_URL!);
    u.searchParams.set('sslmode', 'no-verify');
    const waits: string[] = [];
    const problem = await probeDatabase(u.toString(), quick(waits));
    expect(problem).toMatch(/^cannot connect to the database in DATABASE_URL \(.+\): The server does not support SSL connections$/);
    expect(waits).toEqual([]);
  });

  it('names the target without the user or password', () => {
    expect(databaseTarget('postgres://gateway:s3cret@db.internal:6543/tool_gateway')).toBe('db.internal:6543/tool_gateway');
    expect(databaseTarget('postgres:///tool_gateway?host=/var/run/postgresql')).toBe('/var/run/postgresql:5432/tool_gateway');
  });

  it('the built gateway: a wrong database name stops start-up at once with one line naming DATABASE_URL (exit 1, no stack trace, no password)', async () => {
    const child = spawn(process.execPath, ['dist/src/main.js'], {
      env: {
        PATH: process.env.PATH ?? '', NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn',
        DATABASE_URL: variant({ database: 'no_such_database_x2' }), MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    teeChildToRunLog(child, 'dist/src/main.js with a wrong database name');
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(out.trim()).toMatch(/^fatal: cannot connect to the database in DATABASE_URL \(.*no_such_database_x2\): .*\(3D000\)$/);
    expect(out).not.toContain('@');
  }, 60_000);
});
