import { createCipheriv, randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { dropScratchDatabase, scratchDatabaseUrl } from './scratch-database.js';
import { SHOPIFY_TOKEN } from './secrets.js';

/** dropScratchDatabase: a database a spec made for itself is scanned for the run's secrets before it is dropped. */
describe('a scratch database is leak-scanned before its drop', () => {
  let admin: pg.Client;
  let dbName: string;
  const exists = async (): Promise<boolean> => (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).rowCount === 1;
  const fill = async (sql: string, values: unknown[] = []): Promise<void> => {
    const c = new pg.Client({ connectionString: scratchDatabaseUrl(dbName) });
    await c.connect();
    try {
      await c.query(sql, values);
    } finally {
      await c.end();
    }
  };

  beforeEach(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
    await admin.connect();
    dbName = `tg_scratch_scan_${process.pid}_${Date.now()}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
  });
  afterEach(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  });

  it('a fixed and a minted secret in plain columns (and one only as ciphertext): throws naming them (never the values), and the database is dropped', async () => {
    const minted = `shpat_${randomBytes(16).toString('hex')}`;
    recordMintedSecret('scratch-database.spec planted token', minted);
    await fill(`CREATE TABLE notes (id int, body text, meta jsonb);
                CREATE TABLE integration_credentials (id int, ciphertext bytea)`);
    await fill(`INSERT INTO notes VALUES (1, $1, $2), (2, 'nothing here', NULL)`, [`token=${SHOPIFY_TOKEN}`, { said: minted }]);
    // The one place a secret may be: as AES-GCM ciphertext (plaintext there is a finding: minted-secrets.spec.ts).
    const cipher = createCipheriv('aes-256-gcm', randomBytes(32), randomBytes(12));
    await fill(`INSERT INTO integration_credentials VALUES (1, $1)`, [Buffer.concat([cipher.update(SHOPIFY_TOKEN, 'utf8'), cipher.final()])]);
    const error = await dropScratchDatabase(admin, dbName).then(() => undefined, (e: Error) => e);
    expect(error?.message.split('\n')).toEqual([
      `leak scan of scratch database ${dbName} before its drop: 2 finding(s):`,
      expect.stringMatching(/^ {2}- SHOPIFY_TOKEN \(plain\) in table notes, column body: 1 row\(s\)$/),
      expect.stringMatching(/^ {2}- scratch-database\.spec planted token #\d+ \(plain\) in table notes, column meta: 1 row\(s\)$/),
    ]);
    expect(error?.message).not.toContain(SHOPIFY_TOKEN);
    expect(error?.message).not.toContain(minted.slice(6, 20));
    expect(await exists()).toBe(false);
  });

  it('a database without a secret: dropped, nothing thrown', async () => {
    await fill(`CREATE TABLE notes (id int, body text); INSERT INTO notes VALUES (1, 'shpat_ is only a prefix')`);
    await expect(dropScratchDatabase(admin, dbName)).resolves.toBeUndefined();
    expect(await exists()).toBe(false);
  });

  it('a database that was never created (the spec\'s setup failed first): nothing to scan, nothing thrown', async () => {
    await admin.query(`DROP DATABASE ${dbName}`);
    await expect(dropScratchDatabase(admin, dbName)).resolves.toBeUndefined();
  });
});
