import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { send } from './support.js';

const RULES = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }];

/**
 * A refund left `indeterminate` (applied at Shopify, its answer lost) keeps its order's refund lease until the lease
 * expires (2 × VENDOR_TIMEOUT_MS + 5 s): it may still be running there, and a second refund of the order must not race
 * it. Once ops have seen it done at Shopify and reconciled the call succeeded, it no longer may; but the lease stayed,
 * and every new refund of the order waited for it and failed with nothing sent (model-based review). That reconcile
 * now frees it; one settled failed (not seen, maybe still on its way) does not (session diff review).
 */
describe('reconciling an indeterminate refund frees its order for the next refund', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '2000' });
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the lease is held while the call is indeterminate, and gone once it is reconciled succeeded: the next refund is sent and succeeds', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: RULES });
    const refund = (note: string) => toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01', note });
    const refunded = shop.refundCount('12345');
    h.emu.fault({ vendor: 'shopify', kind: 'reset_after', bodyMatch: /refundCreate/ });
    const first = await send(h, org, refund('first'));
    h.emu.clearFaults();
    expect(first.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(shop.refundCount('12345')).toBe(refunded + 1);
    const leaseOf = async () =>
      (await h.t.ds.query('SELECT holder FROM shopify_refund_leases WHERE order_id = $1 AND lease_until > now()', ['12345'])) as { holder: string }[];
    expect(await leaseOf()).toHaveLength(1); // held: the refund may still run at Shopify

    const rec = await h.t.http.post(`/v1/tool-calls/${first.body.toolCallId}/reconcile`).set(bearer(org.adminKey)).send({ status: 'succeeded', note: 'seen at Shopify' });
    expect(rec.status).toBe(200);
    expect(await leaseOf()).toEqual([]);

    const second = await send(h, org, refund('second'));
    expect(second.body).toMatchObject({ status: 'succeeded' });
    expect(shop.refundCount('12345')).toBe(refunded + 2);
  });

  it('settled failed (not seen at Shopify), the refund may yet land there: its lease is kept until it runs out', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: RULES });
    h.emu.fault({ vendor: 'shopify', kind: 'reset_after', bodyMatch: /refundCreate/ });
    const first = await send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '0.01', note: 'kept' }));
    h.emu.clearFaults();
    expect(first.body).toMatchObject({ status: 'indeterminate' });
    const rec = await h.t.http.post(`/v1/tool-calls/${first.body.toolCallId}/reconcile`).set(bearer(org.adminKey)).send({ status: 'failed', note: 'not seen yet' });
    expect(rec.status).toBe(200);
    const leases = (await h.t.ds.query('SELECT 1 FROM shopify_refund_leases WHERE order_id = $1 AND lease_until > now()', ['450789469'])) as unknown[];
    expect(leases).toHaveLength(1);
  });
});
