import pg from 'pg';

/** What pg's `query_timeout` fails a query with (pg/lib/client.js). */
const QUERY_READ_TIMEOUT = 'Query read timeout';

type QueryCallback = (err: Error | null, result?: unknown) => void;

/**
 * The pg client of every pool built from dbOptions: a query that hit `query_timeout` ends its connection.
 *
 * pg answers the caller at the timeout but leaves the statement in flight, and the connection goes back to the
 * pool unless the caller releases it with the error: pool.query does, TypeORM's query runner (ds.transaction,
 * ds.query, repositories) does not. When the network healed, the statement ran after all: inside a transaction it
 * left the pooled connection "idle in transaction", and the later autocommit writes that landed on it were
 * acknowledged, seen by no other connection, and rolled back when it closed. An ending client is discarded on
 * release whatever the caller passes (pg-pool's `_release` reads `_ending`), and end() drops the socket at once
 * while a query is in flight (pg 8.23): nothing else runs on it, and the server rolls back a transaction left open.
 */
export class QueryTimeoutClient extends pg.Client {
  // Every overload of pg's query (text or config; promise or callback) passes through unchanged. A submittable
  // (a cursor, a stream) reports the timeout as an event instead, and keeps the connection: none is used.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    const last = args.length - 1;
    const callback: unknown = args[last];
    if (typeof callback === 'function') {
      args[last] = (err: Error | null, result?: unknown) => {
        this.endAfter(err);
        (callback as QueryCallback)(err, result);
      };
    }
    const answer: unknown = Reflect.apply(super.query, this, args);
    if (answer instanceof Promise) void answer.catch((err: unknown) => this.endAfter(err));
    return answer;
  }

  /** Before the caller hears of the timeout: a ROLLBACK it sends next fails at once, not after another timeout. */
  private endAfter(err: unknown): void {
    if (err instanceof Error && err.message === QUERY_READ_TIMEOUT) void this.end();
  }
}
