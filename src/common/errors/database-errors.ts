/**
 * Node socket errors and SQLSTATEs that mean "not now" rather than "wrong":
 * connection failures (08xxx, refused, reset, unknown or unreachable host, the gateway out of descriptors or ports),
 * the server going away or starting (57P0x), a statement cancelled — by
 * statement_timeout or by an operator (57014) — or a lock it could not get in
 * time (55P03), and a server out of resources (53xxx: too many connections,
 * disk full, out of memory), a server that is read-only for now (25006: during
 * a failover the writer endpoint may still reach the demoted primary or a
 * replica) and a session the server ended after it sat idle in a transaction
 * (25P03), a serialization failure (40001: rolled back whole; only under an
 * isolation level above read committed, which every connection pins —
 * db-options.ts) and a deadlock the server broke by rolling this transaction
 * back whole (40P01; retryOnDeadlock retries some at once, and the outcome of
 * an executed call must not be lost to one). Retrying later can succeed; a 500
 * would say the request itself was at fault.
 */
const UNAVAILABLE_CODES = new Map([
  ['ECONNREFUSED', 'connection refused'],
  ['ECONNRESET', 'connection reset'],
  ['ETIMEDOUT', 'connection timed out'],
  ['EPIPE', 'connection broken'],
  ['ENOTFOUND', 'host not found (DNS)'],
  ['EAI_AGAIN', 'host not found for now (DNS)'],
  ['EHOSTUNREACH', 'host unreachable'],
  ['ENETUNREACH', 'network unreachable'],
  // The gateway's own machine out of what a new connection needs, for now: descriptors, local ports, buffers. An
  // outcome the vendor gave must be kept and written once they are back, as in an outage, not answered 500 and lost.
  ['EMFILE', 'too many open files in the gateway (a new database connection could not be opened)'],
  ['ENFILE', 'too many open files on the machine (a new database connection could not be opened)'],
  ['EADDRNOTAVAIL', 'no local address or port free for a new database connection'],
  ['ENOBUFS', 'no buffer space for a new database connection'],
  ['57P01', 'server shutting down'],
  ['57P02', 'server crashed (crash shutdown)'],
  ['57P03', 'server not accepting connections yet (starting up or recovering)'],
  ['57014', 'statement timeout (a lock or a slow query), or cancelled by an operator'],
  ['55P03', 'lock timeout (a lock held by another session)'],
  ['53000', 'server out of resources'],
  ['53100', 'disk full'],
  ['53200', 'server out of memory'],
  ['53300', 'too many connections'],
  ['53400', 'server configuration limit exceeded'],
  ['25006', 'read-only (a replica or a failover)'],
  ['25P03', 'session ended after idling in a transaction'],
  ['40001', 'serialization failure'],
  ['40P01', 'deadlock (this transaction was rolled back whole)'],
  ['08000', 'connection failure'],
  ['08001', 'could not connect'],
  ['08003', 'connection does not exist'],
  ['08004', 'connection rejected by the server'],
  ['08006', 'connection failure'],
]);
/** Longest first where one contains another, so the code logged is the most specific. */
const UNAVAILABLE_MESSAGES = new Map([
  ['Connection terminated unexpectedly', 'connection lost'],
  // pg says it without "unexpectedly" when the client was ended on purpose: by pg-client.ts after a query timeout, or at a stop
  ['Connection terminated', 'connection ended by the gateway (after a client query timeout, DB_QUERY_TIMEOUT_MS, or while stopping)'],
  ['timeout exceeded when trying to connect', 'no pool connection in time (DB_POOL_SIZE busy, or connecting timed out)'],
  ['Client has encountered a connection error', 'connection error'],
  ['connect ECONNREFUSED', 'connection refused'],
  ['the database system is shutting down', 'server shutting down'],
  ['the database system is starting up', 'server starting up'],
  // pg's query_timeout: the database did not answer in time (db-options.ts)
  ['Query read timeout', 'client query timeout (DB_QUERY_TIMEOUT_MS)'],
  // a statement after that timeout, on the connection it closed (pg-client.ts)
  ['Client was closed and is not queryable', 'connection closed after a client query timeout (DB_QUERY_TIMEOUT_MS)'],
]);

/**
 * Why the database is unavailable, as log fields: the SQLSTATE or Node errno code (or, for the driver's own errors
 * that carry none, the fixed message it was recognised by) and our phrase for it. Never the error's own message: the
 * server's can quote values from the statement. undefined when the error is not "database unavailable".
 */
export function databaseCause(err: unknown): { code: string; cause: string } | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const o = e as { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown };
    const byCode = typeof o.code === 'string' ? UNAVAILABLE_CODES.get(o.code) : undefined;
    if (byCode !== undefined) return { code: o.code as string, cause: byCode };
    if (typeof o.message === 'string') {
      for (const [known, cause] of UNAVAILABLE_MESSAGES) if (o.message.includes(known)) return { code: known, cause };
    }
    e = o.driverError ?? o.cause;
  }
  return undefined;
}

/**
 * The log fields of a statement that failed, never its text (a server's message can quote the statement's values):
 * `reason` 'database unavailable' with its `code` and `cause` (databaseCause), else `error <code>` when the error has
 * one (a SQLSTATE), else `otherwise`.
 */
export function failedStatementFields(err: unknown, otherwise = 'error'): { reason: string; code?: string; cause?: string } {
  const unavailable = databaseCause(err);
  if (unavailable) return { reason: 'database unavailable', ...unavailable };
  const code = (err as { code?: unknown } | null)?.code;
  return { reason: typeof code === 'string' ? `error ${code}` : otherwise };
}

/** True when an error means "the database cannot be reached right now" (answer 503, not 500). */
export function isDatabaseUnavailable(err: unknown): boolean {
  return databaseCause(err) !== undefined;
}

/** SQLSTATE 40P01: PostgreSQL broke a deadlock by rolling this transaction back whole. */
export function isDeadlock(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const o = e as { code?: unknown; driverError?: unknown; cause?: unknown };
    if (o.code === '40P01') return true;
    e = o.driverError ?? o.cause;
  }
  return false;
}

/**
 * Runs `work` again when it lost a deadlock, up to `attempts` times in all. Only for work whose
 * transaction is safe to run again whole (it was rolled back, and it re-checks what it acts on).
 */
export async function retryOnDeadlock<T>(work: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isDeadlock(err) || attempt >= attempts) throw err;
    }
  }
}
