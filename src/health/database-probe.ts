import pg from 'pg';
import type { DataSourceOptions } from 'typeorm';

/** How long the probe waits, for a connection and then for the answer. */
export const PROBE_TIMEOUT_MS = 2_000;

/**
 * Answers readiness (API.md §8: "database reachable") on a connection of its
 * own. Through the request pool, SELECT 1 queued behind slow but healthy
 * statements and timed out: under a load spike every replica went not-ready at
 * once. One connection, built from the request pool's own options, closed on shutdown.
 */
export class DatabaseProbe {
  private readonly pool: pg.Pool;

  constructor(options: DataSourceOptions) {
    const { url, extra } = options as { url?: string; extra?: pg.PoolConfig };
    this.pool = new pg.Pool({
      ...extra,
      connectionString: url,
      max: 1,
      connectionTimeoutMillis: PROBE_TIMEOUT_MS,
      // A connection the server stopped answering is dropped, so it cannot hold the probe's one slot.
      query_timeout: PROBE_TIMEOUT_MS,
    });
    // An idle connection the server closed (a restart) is discarded by the pool; unheard, the event would end the process.
    this.pool.on('error', () => undefined);
  }

  /**
   * 'up', or 'read-only' when the server takes no writes (a failover to a replica, a demoted primary: every call is
   * then refused DATABASE_UNAVAILABLE, so the gateway is not ready either). Throws when the database is unreachable.
   * One round trip, bounded by the pool's own timeouts: connectionTimeoutMillis (a connection, or the one slot) and
   * query_timeout (the answer).
   */
  async ping(): Promise<'up' | 'read-only'> {
    const { rows } = await this.pool.query<{ ro: boolean }>(`SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' AS ro`);
    return rows[0]?.ro ? 'read-only' : 'up';
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
