import type { DataSource } from 'typeorm';

/**
 * The migrations the database has not applied, read without writing anything: TypeORM's showMigrations creates
 * its migrations table first, so merely looking would have changed the database.
 */
export async function pendingMigrations(ds: DataSource): Promise<string[]> {
  const table = ds.options.migrationsTableName ?? 'migrations';
  const [{ present }] = (await ds.query('SELECT to_regclass($1) IS NOT NULL AS present', [table])) as { present: boolean }[];
  const applied = present ? ((await ds.query(`SELECT name FROM "${table}"`)) as { name: string }[]).map((r) => r.name) : [];
  return ds.migrations.map((m) => m.name ?? m.constructor.name).filter((name) => !applied.includes(name));
}
