import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements, connectionLost, decidedRefund, refunds } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { createKey } from '../support/test-app.js';

/**
 * The statement that takes an order's refund lease commits, and its answer is lost (the connection dropped after the
 * server ran it). The refund is rightly not sent: the call does not know it holds the lease. But that lease was never
 * released, so every other refund of the order, from any org on the shop, was refused busy with nothing sent until it
 * expired (2 × VENDOR_TIMEOUT_MS + 5 s: 35 s by default) (statement-level fault review). The call now releases its own
 * lease (the release deletes only a lease with its holder) whenever it ends without one it knows of.
 */
describe('a refund lease taken with its answer lost', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is released: the next refund of the order runs at once', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = (await createKey(h.t, org.orgId, 'expert')).key;
    let lost = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (lost > 0 || !text.includes('INSERT INTO shopify_refund_leases')) return send();
      lost++;
      await send(); // it commits…
      throw connectionLost(); // …and its answer never comes
    });
    const before = refunds(h);
    let first: Awaited<ReturnType<typeof decidedRefund>>;
    try {
      first = await decidedRefund(h, org, expert, '1.10', 'approve');
    } finally {
      undo();
    }
    expect(lost).toBe(1);
    expect(first.settled.status).toBe('failed'); // not sent: the call did not know it held the lease
    expect(refunds(h)).toBe(before);
    const leases = (await h.t.ds.query('SELECT holder FROM shopify_refund_leases WHERE org_id = $1 AND lease_until > now()', [org.orgId])) as unknown[];
    expect(leases).toEqual([]);

    const second = await decidedRefund(h, org, expert, '1.20', 'approve');
    expect(second.settled.status).toBe('succeeded');
    expect(refunds(h)).toBe(before + 1);
  });
});
