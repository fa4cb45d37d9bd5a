import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * tool_calls.vendor_refused: for a call that failed at its vendor, whether the failure was a refusal of the
 * input (the same input fails the same way) or trouble on the vendor's side (it may work later). The HTTP status
 * cannot tell them apart: a 200 carries both (Shopify's userErrors; its GraphQL INTERNAL_SERVER_ERROR, an
 * unreadable body). Null where it is not known: calls recorded before this column, and every other outcome.
 * A nullable column without a default: added without rewriting the table.
 */
export class ToolCallVendorRefused1765500000000 implements MigrationInterface {
  name = 'ToolCallVendorRefused1765500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls ADD COLUMN vendor_refused boolean');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls DROP COLUMN vendor_refused');
  }
}
