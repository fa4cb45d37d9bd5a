/**
 * A lease (a Shopify token renewal's in vendor_tokens, a refund's in shopify_refund_leases) was given back with ONE
 * statement, its failure only logged: a database blip at that moment (a dropped connection; the database back a moment
 * later) left it held for its whole length, 2 × VENDOR_TIMEOUT_MS + 5 s (35 s by default). Meanwhile every replica's
 * calls of the org waited for the token and failed, or the order's next refund waited half its budget and failed with
 * nothing sent (a reviewer of what failures leave held). The release is now tried again through a short outage.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VendorTokenStore } from '../../src/credentials/vendor-token.store.js';
import { Sql } from '../../src/db/sql.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { shopifyGrant } from '../../src/vendors/shopify/shopify.auth.js';
import type { ShopifyConnection } from '../../src/vendors/shopify/shopify.connection.js';
import { aroundStatements, connectionLost } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN } from '../support/secrets.js';
import { bearer } from '../support/test-app.js';

const SHOP = 'acme-emulator.myshopify.com';
const PUBLIC_APP = { shopDomain: SHOP, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken: SHOPIFY_REFRESH_TOKEN };
const ACCESS = 'shpat_lease_release_blip_access_0001';
recordMintedSecret('lease-release-blip stand-in', ACCESS);

describe('leases given back through a database blip', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a vendor token renewal\'s lease is given back once the database answers again (before: held 35 s, every replica\'s calls of the org waiting)', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const put = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey)).send({ config: PUBLIC_APP });
    expect(put.status).toBe(200);
    const grant = shopifyGrant(org.orgId, { shopDomain: SHOP } as ShopifyConnection, { kind: 'refresh', ...PUBLIC_APP });

    let failed = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      // The blip: the state write and the release right after it both meet a dropped connection (not sent).
      if (failed < 2 && /UPDATE vendor_tokens SET (key_id|lease_id = NULL)/.test(text)) {
        failed++;
        throw connectionLost();
      }
      return send();
    });
    try {
      const got = await h.t.app.get(VendorTokenStore).obtain(grant, async () => ({ token: ACCESS, expiresInSec: 3600 }));
      expect(got.token).toBe(ACCESS);
    } finally {
      undo();
    }
    expect(failed).toBe(2);
    await sleep(1_000); // the database has long been back

    const [row] = (await h.t.ds.query(
      `SELECT lease_id, lease_until > now() AS held, extract(epoch FROM lease_until - now())::float8 AS left_sec FROM vendor_tokens WHERE org_id = $1`,
      [org.orgId],
    )) as { lease_id: string | null; held: boolean | null; left_sec: number | null }[];
    expect(row.held ?? false).toBe(false);
  });
  it('a refund\'s lease is given back once the database answers again: the order\'s next refund runs (before: VENDOR_TIMEOUT, nothing sent)', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    const refund = (amount: string) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount }));
    let failed = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (failed < 1 && text.startsWith('DELETE FROM shopify_refund_leases')) {
        failed++;
        throw connectionLost(); // the blip: the release never reached the database
      }
      return send();
    });
    try {
      const first = await refund('1.01');
      expect(first.body.status, JSON.stringify(first.body)).toBe('succeeded');
    } finally {
      undo();
    }
    expect(failed).toBe(1);
    await sleep(500); // the database has long been back

    const second = await refund('1.02');
    expect(second.body.status, JSON.stringify(second.body)).toBe('succeeded');
  });
});
