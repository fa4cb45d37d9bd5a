/**
 * A refund whose mutation may still be running at Shopify (a 5xx, a lost answer) keeps its order's lease until it
 * expires; nothing ever deleted the row after that (only its holder's release, the order's next refund, or a
 * reconcile did), so shopify_refund_leases grew by a row per such refund, for good (a reviewer of what failures leave
 * held). The orphan sweep's periodic pass now deletes leases expired for more than an hour.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

describe('expired shopify refund leases', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_MAX_RETRIES: '0' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a lease kept for a refund that ended indeterminate is deleted by the periodic pass an hour after it expired, not before', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, bodyMatch: /refundCreate/, times: Infinity } as never);
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }));
    h.emu.clearFaults();
    expect(res.body.status, JSON.stringify(res.body)).toBe('indeterminate');
    const leases = async () => (await h.t.ds.query('SELECT holder FROM shopify_refund_leases WHERE org_id = $1', [org.orgId])) as unknown[];
    expect(await leases()).toHaveLength(1); // kept on purpose while the refund may still land

    const sweeper = h.t.app.get(OrphanSweeperService);
    // Expired, but less than an hour ago: kept.
    await h.t.ds.query(`UPDATE shopify_refund_leases SET lease_until = now() - interval '50 minutes' WHERE org_id = $1`, [org.orgId]);
    await sweeper.pass();
    expect(await leases()).toHaveLength(1);
    // Long after (before: kept for good).
    await h.t.ds.query(`UPDATE shopify_refund_leases SET lease_until = now() - interval '30 days' WHERE org_id = $1`, [org.orgId]);
    await sweeper.pass();
    expect(await leases()).toEqual([]);
  });

  it('deletes a backlog in batches, and only expired leases', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    await h.t.ds.query(
      `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until)
       SELECT $1, 'purge-batches.myshopify.com', g::text, gen_random_uuid(), CASE WHEN g <= 25 THEN now() - interval '2 days' ELSE now() + interval '1 minute' END
         FROM generate_series(1, 30) g`,
      [org.orgId],
    );
    expect(await h.t.app.get(OrphanSweeperService).purgeExpiredLeases(10)).toBe(25);
    const left = (await h.t.ds.query(`SELECT order_id FROM shopify_refund_leases WHERE shop_domain = 'purge-batches.myshopify.com' ORDER BY order_id::int`)) as { order_id: string }[];
    expect(left.map((r) => r.order_id)).toEqual(['26', '27', '28', '29', '30']);
  });
});
