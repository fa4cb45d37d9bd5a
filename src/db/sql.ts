import { Inject, Injectable, Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';

/**
 * Plain SQL on TypeORM's own pg pool, for the hot path: one round trip per
 * statement, rows back as-is, no ORM bookkeeping.
 */
@Injectable()
export class Sql {
  /**
   * Whether statements may be prepared by name (DB_CONNECTION_MODE=direct). Through a pooler they are not: a
   * transaction-mode pool runs the next statement on whichever server connection is free, where a name prepared on
   * another is unknown (26000) or already taken (42P05), and RDS Proxy pins a session that prepares one. Turned off
   * for good the first time that happens (see prepared).
   */
  private named: boolean;
  private readonly log = new Logger('Sql');

  constructor(
    private readonly ds: DataSource,
    @Inject(APP_CONFIG) config: Pick<AppConfig, 'DB_CONNECTION_MODE'>,
  ) {
    this.named = config.DB_CONNECTION_MODE === 'direct';
  }

  private get pool(): Pool {
    return (this.ds.driver as unknown as { master: Pool }).master;
  }

  async query<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    const res = await this.pool.query(text, params);
    return res.rows as T[];
  }

  private readonly names = new Map<string, string>();

  /**
   * A hot-path statement as a named prepared statement: PostgreSQL parses and
   * plans it once per connection instead of on every call. The name is a hash
   * of the text, so each distinct statement shape gets its own. Through a pooler, an unnamed one (see `named`).
   */
  async prepared<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    if (!this.named) return (await this.pool.query(text, params)).rows as T[];
    let name = this.names.get(text);
    if (!name) {
      name = `tg_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      if (this.names.size < 1_000) this.names.set(text, name);
    }
    try {
      const res = await this.pool.query({ name, text, values: params });
      return res.rows as T[];
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (code !== NAME_UNKNOWN && code !== NAME_TAKEN) throw err;
      // The server connection did not know the name (Bind failed) or had it already (Parse failed): either way the
      // statement did not run, so it is sent again, unnamed. A pooler in transaction mode between the gateway and
      // PostgreSQL does this (DB_CONNECTION_MODE=direct behind PgBouncer): before, such statements failed with 500s,
      // an executed call's outcome write among them (the call left `running`).
      if (this.named) {
        this.named = false;
        this.log.warn(
          `a statement prepared by name was ${code === NAME_UNKNOWN ? 'unknown to' : 'already on'} the server connection that ran it (${String(code)}): ` +
            'a connection pooler in transaction mode? Statements are sent unnamed from now on; set DB_CONNECTION_MODE=pooled',
        );
      }
      return (await this.pool.query(text, params)).rows as T[];
    }
  }

  /**
   * BEGIN … COMMIT on one connection; on any error, rolls back and drops the connection, as pool.query does: after
   * a failure the connection may still be running a statement, or be inside the transaction, and must not be reused.
   */
  async transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // The server ending the session while it is checked out (idle_in_transaction_session_timeout, a restart) is
    // heard by the next statement; unheard, the event would end the process.
    client.on('error', ignore);
    let failed = false;
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      failed = true;
      await client.query('ROLLBACK').catch(ignore);
      throw err;
    } finally {
      client.off('error', ignore);
      client.release(failed);
    }
  }
}

const ignore = (): undefined => undefined;

/** invalid_sql_statement_name: Bind to a name the server connection never prepared. */
const NAME_UNKNOWN = '26000';
/** duplicate_prepared_statement: Parse of a name the server connection already has. */
const NAME_TAKEN = '42P05';
