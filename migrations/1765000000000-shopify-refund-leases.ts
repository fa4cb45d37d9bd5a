import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One refund in flight per Shopify order (VENDORS.md §1.9 point 6), across
 * replicas: a row is the lease of the call refunding that order, taken by one
 * conditional upsert (free or expired) and deleted once the outcome is known.
 * Nothing holds a transaction or a connection while the refund is at Shopify;
 * a process that dies holding a lease only delays the order's next refund
 * until `lease_until`.
 */
export class ShopifyRefundLeases1765000000000 implements MigrationInterface {
  name = 'ShopifyRefundLeases1765000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE shopify_refund_leases (
        org_id uuid NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        shop_domain text NOT NULL,
        order_id text NOT NULL,
        holder uuid NOT NULL,
        lease_until timestamptz NOT NULL,
        PRIMARY KEY (org_id, shop_domain, order_id)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE shopify_refund_leases');
  }
}
