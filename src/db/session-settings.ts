/**
 * How the gateway is connected to PostgreSQL (DB_CONNECTION_MODE), and the session settings its code is written for.
 *
 * `direct` (the default): to PostgreSQL itself. Every connection sends the settings as startup parameters
 * (db-options.ts), so they hold whatever the server, database or role sets, and the hot statements are named
 * prepared statements, parsed once per connection (Sql.prepared).
 *
 * `pooled`: through a connection pooler (PgBouncer, AWS RDS Proxy, Neon's pooler, Supabase's Supavisor). Poolers
 * refuse startup parameters they do not know (RDS Proxy refuses `options`; Neon's pooler and a PgBouncer without
 * `ignore_startup_parameters` refuse them all) or drop them (Supavisor), and a transaction-mode pool runs each
 * transaction on whichever server connection is free, where a statement prepared on another is unknown. So nothing
 * but the user, database, application name and client encoding is sent, no statement is named, and the role or
 * database must set the settings: start-up checks (database-probe.ts).
 */
export const DB_CONNECTION_MODES = ['direct', 'pooled'] as const;
export type DbConnectionMode = (typeof DB_CONNECTION_MODES)[number];

/** The client-side query timeout when none is given (DB_QUERY_TIMEOUT_MS's default). */
export const DEFAULT_QUERY_TIMEOUT_MS = 20_000;

/** The server-side statement_timeout for a request pool whose client gives up after `queryTimeoutMs`. */
const STATEMENT_TIMEOUT_MS = 15_000;

/**
 * The server must cancel a slow statement before the client stops waiting for it: a statement the client gave up
 * on (DATABASE_UNAVAILABLE to the caller) but the server went on with would commit behind the gateway's back —
 * a tool call's intent left `running` that nothing executes. So 15 s, or 1 s short of a lower DB_QUERY_TIMEOUT_MS
 * (half of it at the very least: the 1 s minimum has no second to spare). 0 (migrations) is 0: no timeout at all.
 */
export function statementTimeoutFor(queryTimeoutMs: number): number {
  if (queryTimeoutMs === 0) return 0;
  return Math.min(STATEMENT_TIMEOUT_MS, latestStatementTimeout(queryTimeoutMs));
}

/** The longest statement_timeout that ends a statement before the client gives up: 1 s under its wait, half of it under 2 s. */
function latestStatementTimeout(queryTimeoutMs: number): number {
  return Math.max(queryTimeoutMs - 1_000, Math.ceil(queryTimeoutMs / 2));
}

/**
 * The statement_timeout a session may have with a client that gives up after `queryTimeoutMs`: at most 1 s under it
 * (half of it under 2 s), as statementTimeoutFor keeps its own, so a statement the gateway gave up on has been
 * cancelled by then; at least 1 s (or statementTimeoutFor's own, if less), so `15` set for "15 s" (15 ms) is caught
 * rather than cancelling every statement.
 */
export function statementTimeoutRange(queryTimeoutMs: number): { min: number; max: number } {
  return { min: Math.min(1_000, statementTimeoutFor(queryTimeoutMs)), max: latestStatementTimeout(queryTimeoutMs) };
}

/** The least idle_in_transaction_session_timeout a session may have: the gateway's transactions pause for its own work only, never this long. */
const MIN_IDLE_IN_TRANSACTION_MS = 1_000;

/** What a session has, as read from it (pg_settings' `setting`: the timeouts in ms). */
export interface SessionSettingsRead {
  dateStyle: string;
  isolation: string;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

/** A setting the session does not have as the gateway needs it: what was found, and the role setting that fixes it. */
export interface SettingProblem {
  found: string;
  /** `name = 'value'`, for `ALTER ROLE CURRENT_USER SET …` */
  set: string;
}

/**
 * The settings the code cannot work without, judged as a request pool's session has them (`queryTimeoutMs`:
 * DB_QUERY_TIMEOUT_MS). A DateStyle other than ISO reads every timestamp as null (500s, a new key's one answer lost);
 * an isolation above read committed fails concurrent calls and executed calls' outcome writes; a statement_timeout
 * of none, or not well below the client's wait, lets a statement the client gave up on commit behind its back (an
 * intent left `running`), and one of a few ms cancels every statement (statementTimeoutRange); no idle-in-transaction
 * limit leaves a transaction the gateway lost track of holding its locks, and one of a few ms ends its own.
 */
export function sessionSettingProblems(s: SessionSettingsRead, queryTimeoutMs: number): SettingProblem[] {
  const problems: SettingProblem[] = [];
  if (!/^ISO\b/.test(s.dateStyle)) problems.push({ found: `DateStyle is "${s.dateStyle}", not ISO`, set: "DateStyle = 'ISO'" });
  if (s.isolation !== 'read committed') {
    problems.push({ found: `default_transaction_isolation is "${s.isolation}", not read committed`, set: "default_transaction_isolation = 'read committed'" });
  }
  const { min, max } = statementTimeoutRange(queryTimeoutMs);
  if (!(s.statementTimeoutMs >= min && s.statementTimeoutMs <= max)) {
    problems.push({
      found:
        s.statementTimeoutMs > 0
          ? `statement_timeout is ${s.statementTimeoutMs} ms; with DB_QUERY_TIMEOUT_MS ${queryTimeoutMs} ms it must be between ${min} and ${max} ms`
          : 'statement_timeout is 0 (none)',
      set: `statement_timeout = '${statementTimeoutFor(queryTimeoutMs)}ms'`,
    });
  }
  if (!(s.idleInTransactionTimeoutMs >= MIN_IDLE_IN_TRANSACTION_MS)) {
    problems.push({
      found:
        s.idleInTransactionTimeoutMs > 0
          ? `idle_in_transaction_session_timeout is ${s.idleInTransactionTimeoutMs} ms, under ${MIN_IDLE_IN_TRANSACTION_MS} ms`
          : 'idle_in_transaction_session_timeout is 0 (none)',
      set: `idle_in_transaction_session_timeout = '${queryTimeoutMs}ms'`,
    });
  }
  return problems;
}

/** The start-up problem for `problems` (none: null), with the statements that fix them on the role. */
export function sessionSettingsMessage(problems: SettingProblem[], mode: DbConnectionMode): string | null {
  if (problems.length === 0) return null;
  const found = problems.map((p) => p.found).join('; ');
  const fix = problems.map((p) => `ALTER ROLE CURRENT_USER SET ${p.set};`).join(' ');
  const why =
    mode === 'pooled'
      ? `the database sessions do not have the settings the gateway needs (${found}), and with DB_CONNECTION_MODE=pooled it does not send them`
      : `the database sessions do not have the settings the gateway sends at connect (${found}): something between the gateway and PostgreSQL dropped them (a connection pooler? then set DB_CONNECTION_MODE=pooled)`;
  return `${why}. Set them on the gateway's role, connected as that role: ${fix} Then have any pooler in between open new server connections (PgBouncer: RECONNECT on its admin console, or a restart; RELOAD keeps the ones it has); see README "Running against your own PostgreSQL"`;
}
