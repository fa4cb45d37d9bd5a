import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import pg from 'pg';

/**
 * One PostgreSQL for the whole run: DATABASE_URL's server when set, else an
 * embedded one in a child process (never imported here: STACK.md gotcha 1).
 * Either way the tests get a fresh database of their own, dropped at the end.
 */
export default async function setup(): Promise<() => Promise<void>> {
  let serverUrl = process.env.DATABASE_URL;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!serverUrl) {
    const child = spawn(process.execPath, ['scripts/pg-server.mjs'], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, PG_DATA_DIR: `.tmp/pg-test-${process.pid}`, PG_PERSISTENT: '0', PG_FAST: '1', PG_DATABASE: 'postgres_bootstrap' },
    });
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    serverUrl = (JSON.parse(line) as { url: string }).url;
    process.env.TEST_EMBEDDED_PG = '1';
    stopEmbedded = async () => {
      const exited = once(child, 'exit');
      child.stdin!.end();
      await exited;
    };
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
