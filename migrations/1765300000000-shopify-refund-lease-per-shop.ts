import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The refund lease is the order's, not the org's: an order belongs to a shop,
 * and two orgs whose credentials reach the same shop must not refund one order
 * at once (VENDORS.md §1.9 point 6). The key becomes (shop_domain, order_id);
 * org_id stays, naming the holder's org (and deleting its leases with it).
 *
 * Rows the new key would make duplicates go first: expired ones are free
 * leases anyway, and of two live ones for the same order (two orgs refunding
 * it now) the one lasting longest is kept — the other refund's holder then
 * finds no lease to release, which is harmless.
 */
export class ShopifyRefundLeasePerShop1765300000000 implements MigrationInterface {
  name = 'ShopifyRefundLeasePerShop1765300000000';

  async up(q: QueryRunner): Promise<void> {
    // No lease is taken or released while the key changes.
    await q.query('LOCK TABLE shopify_refund_leases IN ACCESS EXCLUSIVE MODE');
    await q.query('DELETE FROM shopify_refund_leases WHERE lease_until < now()');
    await q.query(`
      DELETE FROM shopify_refund_leases a USING shopify_refund_leases b
      WHERE a.shop_domain = b.shop_domain AND a.order_id = b.order_id
        AND (a.lease_until < b.lease_until OR (a.lease_until = b.lease_until AND a.org_id < b.org_id))`);
    await q.query('ALTER TABLE shopify_refund_leases DROP CONSTRAINT shopify_refund_leases_pkey');
    await q.query('ALTER TABLE shopify_refund_leases ADD PRIMARY KEY (shop_domain, order_id)');
  }

  async down(q: QueryRunner): Promise<void> {
    // Every (shop_domain, order_id) is unique, so (org_id, shop_domain, order_id) is too.
    await q.query('LOCK TABLE shopify_refund_leases IN ACCESS EXCLUSIVE MODE');
    await q.query('ALTER TABLE shopify_refund_leases DROP CONSTRAINT shopify_refund_leases_pkey');
    await q.query('ALTER TABLE shopify_refund_leases ADD PRIMARY KEY (org_id, shop_domain, order_id)');
  }
}
