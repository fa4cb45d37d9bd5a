import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN, SHOPIFY_TOKEN } from '../support/secrets.js';

const SHOP = 'acme-emulator.myshopify.com';
const PUBLIC_APP = { shopDomain: SHOP, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken: SHOPIFY_REFRESH_TOKEN };

interface TokenRow {
  grant_id: string;
  key_id: string | null;
  ciphertext: Buffer | null;
}

/**
 * The token state of a rotating grant (vendor_tokens: a public Shopify app's live rotated refresh token) goes
 * with the credentials it came from: a PUT of another grant, or of credentials without one, drops it in the
 * same transaction; a PUT of the same grant (another client secret or API version) keeps it.
 */
describe('vendor token state when the credentials are replaced', () => {
  let h: Harness;
  let shop: ShopifyEmulator;

  beforeAll(async () => {
    h = await startHarness();
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterAll(async () => {
    await h?.close();
  });

  const put = async (org: OrgSetup, config: Record<string, unknown>) => {
    const res = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set({ Authorization: `Bearer ${org.adminKey}` }).send({ config });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };
  const tokenRows = async (orgId: string) =>
    (await h.t.ds.query(`SELECT grant_id, key_id, ciphertext FROM vendor_tokens WHERE org_id = $1 AND integration_type = 'shopify'`, [orgId])) as TokenRow[];

  /** An org on the public app whose first call refreshed once: the gateway's own token store wrote the row. */
  async function orgWithTokenState(): Promise<{ org: OrgSetup; row: TokenRow }> {
    shop.reset();
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    await put(org, PUBLIC_APP);
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ Authorization: `Bearer ${org.agentKey}` }).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.body.status, JSON.stringify(call.body)).toBe('succeeded');
    expect(shop.refreshGrants).toBe(1);
    const [row] = await tokenRows(org.orgId);
    expect(row?.key_id).not.toBeNull();
    return { org, row };
  }

  it('keeps the row when the grant is unchanged: another client secret, another API version', async () => {
    const { org, row } = await orgWithTokenState();
    await put(org, { ...PUBLIC_APP, clientSecret: 'shpss_rotated_client_secret_0002', apiVersion: '2026-04' });
    await put(org, { ...PUBLIC_APP, apiVersion: '2026-07' });
    const after = await tokenRows(org.orgId);
    expect(after).toHaveLength(1);
    expect(after[0].grant_id).toBe(row.grant_id);
    expect(after[0].ciphertext?.equals(row.ciphertext!)).toBe(true);
  });

  it('drops the row on a PUT of another refresh token, of another app or shop, of client credentials alone, or of an access token', async () => {
    for (const next of [
      { ...PUBLIC_APP, refreshToken: 'shprt_another_grant_refresh_0002' },
      { ...PUBLIC_APP, clientId: 'another-client-id-0002' },
      { ...PUBLIC_APP, shopDomain: 'another-shop.myshopify.com' },
      { shopDomain: SHOP, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET },
      { shopDomain: SHOP, accessToken: SHOPIFY_TOKEN },
    ]) {
      const { org } = await orgWithTokenState();
      const other = await orgWithTokenState(); // another org's row is none of this PUT's business
      await put(org, next);
      expect(await tokenRows(org.orgId), JSON.stringify(Object.keys(next))).toEqual([]);
      expect(await tokenRows(other.org.orgId)).toHaveLength(1);
    }
  });
});
