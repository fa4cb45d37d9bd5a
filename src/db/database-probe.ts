import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { readDatabaseUrl } from './database-url.js';
import { dbOptions } from './db-options.js';
import { DEFAULT_QUERY_TIMEOUT_MS, sessionSettingProblems, sessionSettingsMessage, type DbConnectionMode } from './session-settings.js';

/** Errors that say "not yet" (the server is starting, restarting or not reachable yet) rather than "never". */
const TRANSIENT = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', '57P03', '53300']);

export interface ProbeOptions {
  /** how long to keep trying while the database is not reachable yet */
  budgetMs: number;
  intervalMs: number;
  /** one line per failed attempt that will be tried again */
  onWait: (line: string) => void;
  /** asked between attempts: a stop during start-up ends the wait */
  stopped: () => boolean;
  /** DB_QUERY_TIMEOUT_MS: the probe connects with the request pool's own startup parameters (db-options.ts) */
  queryTimeoutMs?: number;
  /** DB_CONNECTION_MODE: whether those parameters carry the session settings (direct, the default), or the role must (pooled) */
  connectionMode?: DbConnectionMode;
  /** DB_POOL_SIZE: in direct mode, compared with the connections the server lets this role open (onWarning) */
  poolSize?: number;
  /** what starts but may not work: one line each */
  onWarning?: (line: string) => void;
}

/** Where the URL points, for messages: host and port, never the user or password. */
export function databaseTarget(url: string): string {
  try {
    const u = readDatabaseUrl(url);
    // The host and port parameters win over the URL's, as in the driver (a socket form's stand-in host among them).
    const host = u.searchParams.get('host') || u.hostname || 'local socket';
    // The path is the database's name, unless it holds an "@" (a password's unencoded "/" made it: its rest is there).
    const database = u.pathname.length > 1 && !u.pathname.includes('@') ? u.pathname : '';
    return `${host}:${u.searchParams.get('port') || u.port || '5432'}${database}`;
  } catch {
    return 'the configured database';
  }
}

/**
 * pg's own client-side messages that quote nothing of the URL, shown as they are, and whether they say "not yet": a
 * connection accepted and closed before the startup handshake is what a port proxy (docker-proxy, cloud-sql-proxy)
 * does while the server behind it is not listening yet; an SSL mode the server does not speak stays so.
 */
const CLIENT_MESSAGES: ReadonlyMap<string, boolean> = new Map([
  ['Connection terminated unexpectedly', true],
  ['The server does not support SSL connections', false],
]);

/**
 * For a connection a pooler refused for a startup parameter it does not take (PgBouncer, RDS Proxy, Neon: 08P01
 * "unsupported startup parameter"), what to do; else ''. The gateway's start-up and the commands say it alike.
 */
export function poolerHint(err: unknown, mode: DbConnectionMode = 'direct'): string {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e?.code !== '08P01' || typeof e.message !== 'string' || !/startup parameter/i.test(e.message)) return '';
  const what =
    mode === 'pooled'
      ? "with DB_CONNECTION_MODE=pooled only your own startup options are sent (DATABASE_URL's options parameter, PGOPTIONS): remove them"
      : 'behind a connection pooler, set DB_CONNECTION_MODE=pooled';
  return `; ${what}: see README "Running against your own PostgreSQL"`;
}

function reason(err: unknown, mode: DbConnectionMode): { text: string; transient: boolean } {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const known = !code && typeof e?.message === 'string' ? CLIENT_MESSAGES.get(e.message) : undefined;
  if (known !== undefined) return { text: (e as { message: string }).message, transient: known };
  // The server's own message for its refusals (authentication, unknown database) names no secret; a client-side
  // error's message may quote the URL's parts, so only its code.
  let text = code && /^[0-9A-Z]{5}$/.test(code) && typeof e?.message === 'string' ? `${e.message} (${code})` : (code ?? 'connection failed');
  text += poolerHint(err, mode);
  // The client's own timeouts carry no code (a server's refusal may name a timeout: "unsupported startup parameter:
  // statement_timeout" is not one).
  const timedOut = !code && typeof e?.message === 'string' && /timeout/i.test(e.message);
  return { text: timedOut ? 'connection timed out' : text, transient: timedOut || (code !== undefined && TRANSIENT.has(code)) };
}

/**
 * The settings the code cannot work without, as the session has them (see sessionSettingProblems): a pooler that
 * accepts the startup options and drops them without a word (Supabase's Supavisor does) leaves the database's own,
 * and with DB_CONNECTION_MODE=pooled none are sent. Null when they hold, else the problem and its fix.
 */
async function sessionSettingsMissing(client: pg.Client, queryTimeoutMs: number, mode: DbConnectionMode): Promise<string | null> {
  const { rows } = await client.query<{ ds: string; iso: string; st: string; it: string }>(
    `SELECT current_setting('DateStyle') AS ds, current_setting('default_transaction_isolation') AS iso,
            (SELECT setting FROM pg_settings WHERE name = 'statement_timeout') AS st,
            (SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout') AS it`,
  );
  const read = { dateStyle: rows[0].ds, isolation: rows[0].iso, statementTimeoutMs: Number(rows[0].st), idleInTransactionTimeoutMs: Number(rows[0].it) };
  return sessionSettingsMessage(sessionSettingProblems(read, queryTimeoutMs), mode);
}

/**
 * Whether the server lets this role open fewer connections than one gateway opens (DB_POOL_SIZE, and /readyz's own):
 * the pool would then meet "sorry, too many clients already" under load, answered 503, taking the connections every
 * other client of the server needs. max_connections less the slots reserved for superusers (and, PostgreSQL 16 and
 * later, for pg_use_reserved_connections), and the role's own CONNECTION LIMIT. Direct mode only: behind a pooler the
 * pooler's pool is what counts. Null when it fits.
 */
async function connectionsShort(client: pg.Client, poolSize: number): Promise<string | null> {
  const { rows } = await client.query<{ max: string; su: string; reserved: string | null; superuser: string; rolelimit: string | null }>(
    `SELECT current_setting('max_connections') AS max, current_setting('superuser_reserved_connections') AS su,
            current_setting('reserved_connections', true) AS reserved, current_setting('is_superuser') AS superuser,
            (SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user) AS rolelimit`,
  );
  const r = rows[0];
  const max = Number(r.max);
  const open = r.superuser === 'on' ? max : max - Number(r.su) - Number(r.reserved ?? 0);
  const roleLimit = Number(r.rolelimit ?? -1);
  const allowed = roleLimit >= 0 ? Math.min(open, roleLimit) : open;
  const needed = poolSize + 1;
  if (needed <= allowed) return null;
  return (
    `DB_POOL_SIZE=${poolSize} (+1 for /readyz) is more connections than the server lets this role open ` +
    `(max_connections ${max}${r.superuser === 'on' ? '' : `, less ${Number(r.su) + Number(r.reserved ?? 0)} reserved`}${roleLimit >= 0 ? `, role limit ${roleLimit}` : ''}: ${allowed}), ` +
    'before any other replica or command connects: under load calls would be answered 503 (too many clients); lower DB_POOL_SIZE or raise max_connections'
  );
}

/**
 * Connects once to the database DATABASE_URL names, before the gateway is built: a wrong password or database
 * name stops start-up at once with one line naming DATABASE_URL, and a database not up yet (a container starting
 * beside the gateway) is waited for, a line per attempt, instead of the framework's retries with stack traces.
 * Answers null when it connected, else the problem.
 */
export async function probeDatabase(url: string, opts: ProbeOptions): Promise<string | null> {
  const deadline = performance.now() + opts.budgetMs;
  for (;;) {
    let client: pg.Client | undefined;
    try {
      // Inside the try: the driver reads the URL's SSL files (sslrootcert…) as it builds the client, and may throw.
      // With the pools' startup parameters (their timeouts, the pinned session settings): a pooler that refuses one
      // (PgBouncer: "unsupported startup parameter", 08P01) is told here, at once, not by the framework's retries.
      const queryTimeoutMs = opts.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
      const mode = opts.connectionMode ?? 'direct';
      const { url: pooled, extra } = dbOptions(url, 1, queryTimeoutMs, mode) as { url: string; extra: pg.ClientConfig };
      const { statement_timeout, idle_in_transaction_session_timeout, options, application_name } = extra;
      client = new pg.Client({
        connectionString: pooled, connectionTimeoutMillis: 5_000, query_timeout: 5_000,
        statement_timeout, idle_in_transaction_session_timeout, options, application_name,
      });
      // A connection lost mid-probe is reported by connect() or end(); without a listener it would crash the process.
      client.on('error', () => undefined);
      await client.connect();
      const missing = await sessionSettingsMissing(client, queryTimeoutMs, mode);
      if (missing === null && mode === 'direct' && opts.poolSize !== undefined && opts.onWarning) {
        const short = await connectionsShort(client, opts.poolSize);
        if (short) opts.onWarning(short);
      }
      await client.end().catch(() => undefined);
      return missing;
    } catch (err) {
      await client?.end().catch(() => undefined);
      const { text, transient } = reason(err, opts.connectionMode ?? 'direct');
      const problem = `cannot connect to the database in DATABASE_URL (${databaseTarget(url)}): ${text}`;
      if (!transient || performance.now() + opts.intervalMs > deadline || opts.stopped()) return problem;
      opts.onWait(`${problem}; trying again`);
      await sleep(opts.intervalMs);
      if (opts.stopped()) return problem;
    }
  }
}
