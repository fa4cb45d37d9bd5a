import type { DataSource } from 'typeorm';

/**
 * Whether a statement of `ds`'s database, other than the asker's, waits on a lock and reads like `pattern` (SQL LIKE,
 * over the first 1 kB of its text, which is what pg_stat_activity keeps).
 */
export async function waitsOnLock(ds: DataSource, pattern: string): Promise<boolean> {
  const rows = (await ds.query(
    `SELECT 1 FROM pg_stat_activity
      WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid() AND query LIKE $1`,
    [pattern],
  )) as unknown[];
  return rows.length > 0;
}
