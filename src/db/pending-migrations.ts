import type { DataSource } from 'typeorm';

/**
 * The migrations the database has not applied, read without writing anything: TypeORM's showMigrations creates
 * its migrations table first, so merely looking would have changed the database. The table is looked for where
 * TypeORM keeps it, in current_schema() (the first schema of search_path that exists), not along the whole path: a
 * gateway given a schema of its own (`-c search_path=tg_b,public`) with another's tables in public found those,
 * saw nothing pending, and then read and wrote the other gateway's tables.
 */
export async function pendingMigrations(ds: DataSource): Promise<string[]> {
  const table = ds.options.migrationsTableName ?? 'migrations';
  // regclass as text: the table's name quoted as this session's search_path reads it (null when there is none).
  const [{ name }] = (await ds.query(`SELECT to_regclass(quote_ident(current_schema()) || '.' || quote_ident($1))::text AS name`, [table])) as {
    name: string | null;
  }[];
  const applied = name ? ((await ds.query(`SELECT name FROM ${name}`)) as { name: string }[]).map((r) => r.name) : [];
  return ds.migrations.map((m) => m.name ?? m.constructor.name).filter((name) => !applied.includes(name));
}
