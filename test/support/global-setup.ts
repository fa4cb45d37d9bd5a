import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';

/**
 * One PostgreSQL for the whole run: DATABASE_URL's server when set, else an
 * embedded one in a child process (never imported here: STACK.md gotcha 1).
 * Either way the tests get a fresh database of their own, dropped at the end.
 */
export default async function setup(): Promise<() => Promise<void>> {
  let serverUrl = process.env.DATABASE_URL;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!serverUrl) {
    // startEmbeddedPostgres spawns scripts/pg-server.mjs; embedded-postgres itself is never imported here.
    const embedded = await startEmbeddedPostgres(`.tmp/pg-test-${process.pid}`, { persistent: false, fast: true });
    serverUrl = embedded.url;
    process.env.TEST_EMBEDDED_PG = '1';
    stopEmbedded = () => embedded.stop();
  }
  const dbName = `tg_test_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  process.env.TEST_SERVER_URL = serverUrl;
  process.env.DATABASE_URL = url.toString(); // forked workers inherit it

  return async () => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await c.end();
    await stopEmbedded?.();
  };
}
