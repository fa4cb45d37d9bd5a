import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShopifyRefundLeasePerShop1765300000000 } from '../../migrations/1765300000000-shopify-refund-lease-per-shop.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { dbOptions } from '../../src/db/db-options.js';
import { dropScratchDatabase } from '../support/scratch-database.js';

const ORG_A = '00000000-0000-4000-8000-00000000000a';
const ORG_B = '00000000-0000-4000-8000-00000000000b';
const SHOP = 'acme.myshopify.com';
const [H1, H2, H3, H4] = [1, 2, 3, 4].map((n) => `00000000-0000-4000-8000-00000000010${n}`);

/**
 * The refund lease keyed on the shop's order instead of org × shop × order
 * (VENDORS.md §1.9 point 6): the migration on a database that already holds
 * leases two orgs took on one order, and back.
 */
describe('migration ShopifyRefundLeasePerShop: the refund lease is the shop\'s order\'s', () => {
  let admin: pg.Client;
  let db: DataSource;
  let dbName: string;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
    await admin.connect();
    dbName = `tg_lease_${process.pid}_${Date.now()}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    const url = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
    url.pathname = `/${dbName}`;
    // Every migration before this one.
    const before = MIGRATIONS.slice(0, MIGRATIONS.indexOf(ShopifyRefundLeasePerShop1765300000000));
    db = await new DataSource({ ...dbOptions(url.toString(), 2), migrations: before }).initialize();
    await db.runMigrations({ transaction: 'each' });
  });
  afterAll(async () => {
    await db?.destroy();
    try {
      if (admin) await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
    } finally {
      await admin?.end();
    }
  });

  const migrate = async (step: 'up' | 'down') => {
    const qr = db.createQueryRunner();
    await qr.connect();
    try {
      await qr.startTransaction();
      await new ShopifyRefundLeasePerShop1765300000000()[step](qr);
      await qr.commitTransaction();
    } catch (err) {
      await qr.rollbackTransaction();
      throw err;
    } finally {
      await qr.release();
    }
  };
  const primaryKey = async () =>
    ((await db.query(
      `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
       WHERE i.indrelid = 'shopify_refund_leases'::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
    )) as { attname: string }[]).map((r) => r.attname);
  const insert = (org: string, order: string, holder: string, until: string) =>
    db.query(`INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until) VALUES ($1, $2, $3, $4, now() + $5::interval)`, [org, SHOP, order, holder, until]);

  it('up: duplicates across orgs go (expired ones, and of live ones all but the longest), the key becomes (shop_domain, order_id); down restores the old key', async () => {
    await db.query(`INSERT INTO orgs (id, name) VALUES ($1, 'a'), ($2, 'b')`, [ORG_A, ORG_B]);
    expect(await primaryKey()).toEqual(['org_id', 'shop_domain', 'order_id']);
    await insert(ORG_A, '1', H1, '10 minutes'); // both orgs hold order 1 now: the longer lease stays
    await insert(ORG_B, '1', H2, '20 minutes');
    await insert(ORG_A, '2', H3, '-1 minute'); // expired
    await insert(ORG_B, '2', H4, '5 minutes');

    await migrate('up');
    expect(await primaryKey()).toEqual(['shop_domain', 'order_id']);
    const rows = (await db.query('SELECT org_id, order_id, holder FROM shopify_refund_leases ORDER BY order_id')) as Record<string, string>[];
    expect(rows).toEqual([
      { org_id: ORG_B, order_id: '1', holder: H2 },
      { org_id: ORG_B, order_id: '2', holder: H4 },
    ]);
    // One lease per order, whichever org asks; the org is still the holder's (its leases go with it).
    await expect(insert(ORG_A, '1', H1, '1 minute')).rejects.toThrow(/duplicate key/);
    await db.query('DELETE FROM orgs WHERE id = $1', [ORG_B]);
    expect(await db.query('SELECT 1 FROM shopify_refund_leases')).toEqual([]);

    await insert(ORG_A, '3', H1, '1 minute');
    await migrate('down');
    expect(await primaryKey()).toEqual(['org_id', 'shop_domain', 'order_id']);
    expect(await db.query('SELECT order_id FROM shopify_refund_leases')).toEqual([{ order_id: '3' }]);
  });
});
