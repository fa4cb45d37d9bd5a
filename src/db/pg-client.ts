import pg from 'pg';

/** What pg's `query_timeout` fails a query with (pg/lib/client.js). */
const QUERY_READ_TIMEOUT = 'Query read timeout';

type QueryCallback = (err: Error | null, result?: unknown) => void;

/** The embedded clusters this process reaches (host:port): their server asks for SCRAM, never for a password as sent. */
const scramOnly = new Set<string>();

/** The host:port a URL names, as a pg client reads it into its host and port. */
function serverOf(url: string): string {
  const u = new URL(url);
  return `${u.hostname.replace(/^\[|\]$/g, '')}:${u.port || '5432'}`;
}

/**
 * Marks `url`'s server as an embedded cluster (scripts/pg-server.mjs): from now on every PasswordSafeClient of this
 * process refuses to send it the password in clear or as MD5, whoever answers at its address.
 */
export function requireScramAt(url: string): void {
  scramOnly.add(serverOf(url));
}

/**
 * A pg client that does not hand the embedded cluster's superuser password to whatever holds its port. That cluster
 * asks for SCRAM (which proves the password without sending it); pg answers any method a server asks for, so a local
 * process holding 127.0.0.1:<port> while the postmaster did not (between the port's choice and the server's start, or
 * in the second before a postmaster that died is started again) was sent the password in clear by the next connection.
 * To a server marked by requireScramAt, a request for the password in clear or as MD5 is answered by closing the
 * connection with an error instead. Other servers (a DATABASE_URL of the user's) are answered as pg answers them.
 */
export class PasswordSafeClient extends pg.Client {
  _handleAuthCleartextPassword(msg: unknown): void {
    if (!this.refused('the password in clear')) PG_CLIENT._handleAuthCleartextPassword!.call(this, msg);
  }

  _handleAuthMD5Password(msg: unknown): void {
    if (!this.refused('an MD5 password')) PG_CLIENT._handleAuthMD5Password!.call(this, msg);
  }

  /** Whether the request for `what` was refused (the connection closed with an error): always, from a marked server. */
  private refused(what: string): boolean {
    const self = this as unknown as { host: string; port: number; connection: { emit(event: 'error', err: Error): void; stream: { destroy(): void } } };
    if (!scramOnly.has(`${self.host}:${self.port}`)) return false;
    const err = new Error(`the server at ${self.host}:${self.port} asked for ${what}, which the embedded PostgreSQL never does: it is not that server, and was not answered`);
    self.connection.emit('error', err);
    self.connection.stream.destroy();
    return true;
  }
}

/** pg's own answers to the two requests, for the servers PasswordSafeClient does not refuse. */
const PG_CLIENT = pg.Client.prototype as unknown as Partial<Record<'_handleAuthCleartextPassword' | '_handleAuthMD5Password', (this: pg.Client, msg: unknown) => void>>;

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
export class QueryTimeoutClient extends PasswordSafeClient {
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
