/**
 * The embedded database's first start stopped between initdb and CREATE DATABASE (a kill -9, a power loss, a
 * first start() that failed): a later start on the same DATA_DIR must still come up, not fail for ever with
 * `database "tool_gateway" does not exist`. One fresh cluster (initdb costs seconds), so one test.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startGatewayProcess } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';
import { childrenOf, postmasterOf } from '../support/embedded-processes.js';

const root = resolve('.tmp', `first-start-${process.pid}`);
const pgDir = join(root, 'pg'); // where main.ts keeps the embedded cluster of DATA_DIR=root
/** A port PostgreSQL refuses on its command line: start() fails right after initdb, every time. */
const BAD_PORT = '70000';

/** pg-server.mjs as main.ts runs it (persistent), on a port PostgreSQL refuses; resolves with its exit code and stderr. */
async function failingPgServer(): Promise<{ code: number; err: string }> {
  const child = spawn(process.execPath, ['scripts/pg-server.mjs'], {
    env: { ...process.env, PG_DATA_DIR: pgDir, PG_PERSISTENT: '1', PG_FAST: '1', PG_PORT: BAD_PORT },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  teeChildToRunLog(child, 'pg-server.mjs (failing first start)', { privateStdout: true });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, err };
}

const environ = (pid: number): string[] => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('embedded PostgreSQL: an interrupted first start', () => {
  it('a later start on the same DATA_DIR creates the missing database and serves', async () => {
    const first = await failingPgServer();
    expect(first.code, first.err).toBe(1);
    expect(existsSync(join(pgDir, 'PG_VERSION'))).toBe(true); // initdb ran: the cluster is there, its database is not
    expect(readdirSync(dirname(pgDir)).filter((n) => n.includes('.initdb-'))).toEqual([]); // no half-built folder left

    // A postmaster.pid a killed server left behind is not "another gateway using this data folder": PostgreSQL
    // replaces a stale one itself, and here it failed for another reason (the port).
    writeFileSync(join(pgDir, 'postmaster.pid'), '2147483646\n');
    const again = await failingPgServer();
    rmSync(join(pgDir, 'postmaster.pid'), { force: true });
    expect(again.code, again.err).toBe(1);
    expect(again.err).toMatch(/PostgreSQL said:/);
    expect(again.err).not.toMatch(/postmaster\.pid exists/);

    // pg-server's own knobs in the gateway's environment are not passed on: the gateway picks the port and database.
    // DB_CONNECTION_MODE=pooled is for a pooler in front of a DATABASE_URL: said so, and the embedded one gets the settings.
    const gw = await startGatewayProcess({ DATABASE_URL: undefined, DATA_DIR: root, PG_PORT: BAD_PORT, PG_DATABASE: 'elsewhere', DB_CONNECTION_MODE: 'pooled' }, 60_000);
    try {
      expect(gw.output()).toContain('embedded PostgreSQL started');
      expect(gw.output()).toContain('warning: DB_CONNECTION_MODE=pooled is for a DATABASE_URL behind a connection pooler');
      expect((await gw.http.get('/readyz')).status).toBe(200);

      // Nor the gateway's secrets: pg-server.mjs, the postmaster and its backends never need them. The library hands
      // its whole environment on, so the postmaster (run as the postgres system user when started as root: a second
      // account) held the master key, and a superuser session read it back with COPY … FROM PROGRAM.
      const { pid: postmaster, port } = postmasterOf(pgDir);
      const pgServer = childrenOf(gw.pid).find((pid) => childrenOf(pid).includes(postmaster));
      expect({ pgServer, postmaster }).toEqual({ pgServer: expect.any(Number), postmaster: expect.any(Number) });
      const holders = [pgServer!, postmaster, ...childrenOf(postmaster)].filter((pid) =>
        environ(pid).some((kv) => kv === `MASTER_ENCRYPTION_KEY=${TEST_MASTER_KEY}` || kv === `BOOTSTRAP_ADMIN_KEY=${TEST_ADMIN_KEY}`),
      );
      expect(holders).toEqual([]);
      const su = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: readFileSync(`${pgDir}.password`, 'utf8').trim(), database: 'postgres' });
      await su.connect();
      try {
        await su.query('CREATE TEMP TABLE printed_env (line text)');
        await su.query(`COPY printed_env FROM PROGRAM 'printenv'`);
        const printed = (await su.query<{ line: string }>('SELECT line FROM printed_env')).rows.map((r) => r.line);
        expect(printed.length).toBeGreaterThan(0); // PATH at least
        expect(printed.filter((l) => l.includes(TEST_MASTER_KEY) || l.includes(TEST_ADMIN_KEY))).toEqual([]);
      } finally {
        await su.end();
      }
    } finally {
      await gw.stop();
    }
    expect((await gw.waitExit()).code).toBe(0);
  }, 120_000);
});
