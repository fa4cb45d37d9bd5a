const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '57P01', '57P02', '57P03', '08000', '08001', '08003', '08006']);
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'connect ECONNREFUSED',
  'the database system is shutting down',
  'the database system is starting up',
  'Connection terminated unexpectedly',
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
