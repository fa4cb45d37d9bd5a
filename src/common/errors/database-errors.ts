/**
 * Node socket errors and SQLSTATEs that mean "not now" rather than "wrong":
 * connection failures (08xxx, refused, reset, unknown or unreachable host),
 * the server going away or starting (57P0x), a statement cancelled — by
 * statement_timeout or by an operator (57014) — or a lock it could not get in
 * time (55P03), and a server out of resources (53xxx: too many connections,
 * disk full, out of memory), a server that is read-only for now (25006: during
 * a failover the writer endpoint may still reach the demoted primary or a
 * replica) and a session the server ended after it sat idle in a transaction
 * (25P03), and a serialization failure (40001: rolled back whole; only under an
 * isolation level above read committed, which every connection pins —
 * db-options.ts). Retrying later can succeed; a 500 would say the request
 * itself was at fault.
 */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  '57P01', '57P02', '57P03', '57014', '55P03', '53000', '53100', '53200', '53300', '53400', '25006', '25P03', '40001',
  '08000', '08001', '08003', '08004', '08006',
]);
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'connect ECONNREFUSED',
  'the database system is shutting down',
  'the database system is starting up',
  'Connection terminated unexpectedly',
  'Query read timeout', // pg's query_timeout: the database did not answer in time (db-options.ts)
  'Client was closed and is not queryable', // a statement after that timeout, on the connection it closed (pg-client.ts)
];

/** True when an error means "the database cannot be reached right now" (answer 503, not 500). */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const o = e as { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown };
    if (typeof o.code === 'string' && UNAVAILABLE_CODES.has(o.code)) return true;
    if (typeof o.message === 'string' && UNAVAILABLE_MESSAGES.some((m) => (o.message as string).includes(m))) return true;
    e = o.driverError ?? o.cause;
  }
  return false;
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
