/**
 * The benchmark's PostgreSQL: a fresh database on DATABASE_URL's server, or an
 * embedded durable server of its own, and the server processes whose CPU we count.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.js';
import type { Cleanup } from './gateway-bench.procs.js';
import { descendants } from './gateway-bench.sampling.js';

export interface BenchDatabase {
  /** URL of the fresh database the gateway uses */
  url: string;
  kind: 'embedded (durable: fsync on)' | 'DATABASE_URL server';
  /**
   * PostgreSQL processes whose CPU we can count: the whole embedded server, or
   * on a DATABASE_URL server the backends serving our database (when that
   * server runs on this machine; none otherwise).
   */
  serverPids(): Promise<number[]>;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * DATABASE_URL set: a fresh database on that server, dropped at the end.
 * Unset: an embedded PostgreSQL with durable settings in .tmp/bench-pg (deleted at the end),
 * and a fresh database on it.
 */
export async function startDatabase(root: string, cleanup: Cleanup): Promise<BenchDatabase> {
  let serverUrl = process.env.DATABASE_URL;
  const kind: BenchDatabase['kind'] = serverUrl ? 'DATABASE_URL server' : 'embedded (durable: fsync on)';
  let embeddedPid: number | undefined;
  if (!serverUrl) {
    const dir = join(root, '.tmp', 'bench-pg');
    const pidFile = join(dir, 'postmaster.pid');
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      if (Number.isInteger(pid) && pid > 0 && pidAlive(pid)) throw new Error(`${dir} is in use by a running PostgreSQL (pid ${pid}): is another benchmark running?`);
    }
    rmSync(dir, { recursive: true, force: true }); // left over by a killed run
    const embedded = await startEmbeddedPostgres(dir, { persistent: false, fast: false });
    cleanup.add('embedded PostgreSQL', () => embedded.stop());
    serverUrl = embedded.url;
    embeddedPid = embedded.child.pid;
  }
  const dbName = `tg_gwbench_${process.pid}`;
  if (kind === 'DATABASE_URL server') {
    // registered before the CREATE: a signal while it runs must not leave the database behind
    cleanup.add(`drop database ${dbName}`, async () => {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    });
  }
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${dbName}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  const serverPids = async (): Promise<number[]> => {
    if (embeddedPid !== undefined) return descendants(embeddedPid);
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      const res = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]);
      return res.rows.map((r) => r.pid).filter((pid) => existsSync(`/proc/${pid}/stat`));
    } finally {
      await c.end();
    }
  };
  return { url: url.toString(), kind, serverPids };
}
