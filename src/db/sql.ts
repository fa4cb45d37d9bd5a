import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';

/**
 * Plain SQL on TypeORM's own pg pool, for the hot path: one round trip per
 * statement, rows back as-is, no ORM bookkeeping.
 */
@Injectable()
export class Sql {
  constructor(private readonly ds: DataSource) {}

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
   * of the text, so each distinct statement shape gets its own.
   */
  async prepared<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    let name = this.names.get(text);
    if (!name) {
      name = `tg_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      if (this.names.size < 1_000) this.names.set(text, name);
    }
    const res = await this.pool.query({ name, text, values: params });
    return res.rows as T[];
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
