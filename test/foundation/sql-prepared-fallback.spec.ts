import { createHash } from 'node:crypto';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dbOptions } from '../../src/db/db-options.js';
import { Sql } from '../../src/db/sql.js';

/**
 * A named prepared statement the server connection does not know, or has already: what a transaction-mode pooler
 * (PgBouncer) does to DB_CONNECTION_MODE=direct, whose statements after the first go out as Bind only, to whichever
 * server connection is free. Measured with PgBouncer 1.18 before this: 541 of 640 calls answered 500 and 87 executed
 * calls left `running`. Here one pooled connection plays it: its server session loses the name (DEALLOCATE) or has it
 * already (PREPARE) behind the driver's back.
 */
describe('a hot-path statement whose prepared name the server connection does not have as the driver thinks', () => {
  let ds: DataSource;
  const text = 'SELECT $1::int + 1 AS n';

  beforeAll(async () => {
    ds = await new DataSource(dbOptions(process.env.DATABASE_URL!, 1)).initialize(); // one connection: every statement on it
  });
  afterAll(async () => ds?.destroy());

  const named = async (): Promise<string[]> =>
    ((await ds.query('SELECT name FROM pg_prepared_statements WHERE NOT from_sql ORDER BY name')) as { name: string }[]).map((r) => r.name);

  it('unknown (26000): answered all the same, unnamed from then on; nothing else fails', async () => {
    const sql = new Sql(ds, { DB_CONNECTION_MODE: 'direct' });
    expect(await sql.prepared(text, [1])).toEqual([{ n: 2 }]);
    expect(await named()).toHaveLength(1); // prepared by name on the one connection
    await ds.query('DEALLOCATE ALL'); // the server connection forgets it; the driver still sends Bind only
    expect(await sql.prepared(text, [2])).toEqual([{ n: 3 }]);
    expect(await sql.prepared('SELECT $1::int * 2 AS n', [4])).toEqual([{ n: 8 }]);
    expect(await named()).toEqual([]); // nothing prepared by name since
  });

  it('already there (42P05, another client of the pooler prepared the same statement on this server connection): answered all the same', async () => {
    await ds.query('DEALLOCATE ALL');
    const sql = new Sql(ds, { DB_CONNECTION_MODE: 'direct' });
    const other = 'SELECT $1::int - 1 AS n';
    // The name is the statement's text hashed (every replica gives one statement the same name): taken first here.
    await ds.query(`PREPARE tg_${createHash('sha1').update(other).digest('hex').slice(0, 20)} AS ${other}`);
    expect(await sql.prepared(other, [10])).toEqual([{ n: 9 }]);
    expect(await sql.prepared(text, [1])).toEqual([{ n: 2 }]);
    expect(await named()).toEqual([]); // unnamed from then on
  });

  it('another error is not taken for it: thrown as it was, and the next statement is still prepared by name', async () => {
    await ds.query('DEALLOCATE ALL');
    const sql = new Sql(ds, { DB_CONNECTION_MODE: 'direct' });
    await expect(sql.prepared('SELECT 1 / $1::int AS n', [0])).rejects.toMatchObject({ code: '22012' });
    expect(await sql.prepared('SELECT $1::int AS n', [5])).toEqual([{ n: 5 }]);
    expect((await named()).length).toBeGreaterThanOrEqual(1);
  });

  it('pooled: never by name', async () => {
    await ds.query('DEALLOCATE ALL');
    const sql = new Sql(ds, { DB_CONNECTION_MODE: 'pooled' });
    expect(await sql.prepared(text, [1])).toEqual([{ n: 2 }]);
    expect(await named()).toEqual([]);
  });
});
