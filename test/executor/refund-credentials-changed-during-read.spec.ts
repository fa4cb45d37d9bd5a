import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { aroundStatements } from '../approvals/support.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * A refund's order read under its lease is a round trip to Shopify. A DELETE of the credentials, a replacing PUT or
 * the kill switch answered while it is there is in force for the refund: it is not sent (it went out up to a read's
 * time after the 204 and was recorded succeeded). Found by a review of credential changes under concurrency.
 */
describe('credentials changed while a refund reads its order under the lease', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const refunds = () => h.emu.vendor<ShopifyEmulator>('shopify').refundCount('12345');

  /** Once the refund passed its post-lease check, the next Shopify answer (the order read under the lease) takes 400 ms; `during` runs 100 ms in. */
  function duringLeasedRead(org: OrgSetup, during: () => Promise<void>): { undo: () => void; done: Promise<void> } {
    let leased = false;
    let fired = false;
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (text.includes('INSERT INTO shopify_refund_leases') && params[0] === org.orgId) leased = true;
      const rows = await send();
      if (leased && !fired && text.includes('AS live')) {
        fired = true;
        h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 400 });
        setTimeout(() => void during().then(resolve, resolve), 100);
      }
      return rows;
    });
    return { undo, done };
  }

  const refund = (org: OrgSetup) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));

  it('DELETE answered 204 while the refund reads the order: the refund must not be sent (CREDENTIALS_NOT_FOUND)', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    let deleted = 0;
    const { undo, done } = duringLeasedRead(org, async () => {
      const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey));
      expect(del.status).toBe(204);
      deleted++;
    });
    const before = refunds();
    try {
      const res = await refund(org);
      await done;
      expect(deleted).toBe(1);
      expect({ status: res.body.status, errorCode: res.body.errorCode, refundsSent: refunds() - before }).toEqual({
        status: 'failed',
        errorCode: 'CREDENTIALS_NOT_FOUND',
        refundsSent: 0,
      });
    } finally {
      undo();
    }
  });

  it.each([
    [
      'a replacing PUT (another access token), answered 200',
      (org: OrgSetup) =>
        h.t.http
          .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
          .set(bearer(org.adminKey))
          .send({ config: { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId), accessToken: `${CREDENTIALS.shopify.accessToken}0` } }),
    ],
    [
      'the kill switch thrown (tool_calling_enabled off), answered 200',
      (org: OrgSetup) => h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(bearer(org.adminKey)).send({ enabled: false }),
    ],
  ])('same with %s: the refund is not sent', async (_what, change) => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    const { undo, done } = duringLeasedRead(org, async () => {
      expect((await change(org)).status).toBe(200);
    });
    const before = refunds();
    try {
      const res = await refund(org);
      await done;
      expect({ status: res.body.status, refundsSent: refunds() - before }).toEqual({ status: 'failed', refundsSent: 0 });
    } finally {
      undo();
    }
  });
});
