import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VendorTokenStore } from '../../src/credentials/vendor-token.store.js';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { shopifyGrant } from '../../src/vendors/shopify/shopify.auth.js';
import type { ShopifyConnection } from '../../src/vendors/shopify/shopify.connection.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN, SHOPIFY_TOKEN } from '../support/secrets.js';

const SHOP = 'acme-emulator.myshopify.com';
const PUBLIC_APP = { shopDomain: SHOP, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken: SHOPIFY_REFRESH_TOKEN };
const ANOTHER_GRANT = { ...PUBLIC_APP, refreshToken: 'shprt_another_grant_refresh_0002' };

// The secrets this spec's stand-in refreshes hand out and its PUTs store: the run-wide leak scan looks for them too.
for (const secret of [
  ANOTHER_GRANT.refreshToken,
  'shpss_rotated_client_secret_0002',
  'shpat_old_grant_access',
  'shprt_old_grant_rotated_0003',
  'shpat_new_grant_access',
  ...[1, 2, 3].map((n) => `shpat_new_grant_access_${n}`),
  ...[4, 5, 6, 7].map((n) => `shprt_new_grant_rotated_000${n}`),
  ...[1, 2].map((n) => `shpat_short_lived_access_${n}`),
  ...[1, 2].map((n) => `shprt_short_lived_rotated_000${n}`),
])
  recordMintedSecret('token-state.spec stand-in secret', secret);

/** The grant the Shopify handler builds from a public app's config. */
const grantOf = (orgId: string, cfg: typeof PUBLIC_APP) => shopifyGrant(orgId, { shopDomain: cfg.shopDomain } as ShopifyConnection, { kind: 'refresh', ...cfg });

interface TokenRow {
  grant_id: string;
  key_id: string | null;
  ciphertext: Buffer | null;
}

/**
 * The token state of a rotating grant (vendor_tokens: a public Shopify app's live rotated refresh token) goes
 * with the credentials it came from: a PUT of another grant, or of credentials without one, drops it in the
 * same transaction (the row stays, with no state, as the new grant's); a PUT of the same grant (another client
 * secret or API version) keeps it. A call that loaded the old config before such a PUT stores nothing after it.
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

  it('drops the state on a PUT of another refresh token, of another app or shop, of client credentials alone, or of an access token', async () => {
    for (const next of [
      ANOTHER_GRANT,
      { ...PUBLIC_APP, clientId: 'another-client-id-0002' },
      { ...PUBLIC_APP, shopDomain: 'another-shop.myshopify.com' },
      { shopDomain: SHOP, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET },
      { shopDomain: SHOP, accessToken: SHOPIFY_TOKEN },
    ]) {
      const { org, row } = await orgWithTokenState();
      const other = await orgWithTokenState(); // another org's row is none of this PUT's business
      await put(org, next);
      const after = await tokenRows(org.orgId);
      expect(after, JSON.stringify(Object.keys(next))).toMatchObject([{ key_id: null, ciphertext: null }]);
      expect(after[0].grant_id).not.toBe(row.grant_id);
      if ('refreshToken' in next) expect(after[0].grant_id).toBe(grantOf(org.orgId, next).grantId);
      expect((await tokenRows(other.org.orgId))[0].ciphertext?.equals(other.row.ciphertext!)).toBe(true);
    }
  });

  it('a call still under the replaced grant gets its token but stores nothing, also when the PUT lands during its refresh', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const store = h.t.app.get(VendorTokenStore);
    const oldGrant = grantOf(org.orgId, PUBLIC_APP);
    const newGrant = grantOf(org.orgId, ANOTHER_GRANT);
    const used: string[] = [];
    const refreshOld = (during?: () => Promise<void>) => async (refreshToken: string) => {
      used.push(refreshToken);
      await during?.();
      return { token: 'shpat_old_grant_access', expiresInSec: 3600, refreshToken: 'shprt_old_grant_rotated_0003' };
    };
    const newGrantOnly = [{ grant_id: newGrant.grantId, key_id: null, ciphertext: null }];

    // The call loaded the old config, the admin replaced the refresh token, and then the call reaches the token store.
    await put(org, PUBLIC_APP);
    await put(org, ANOTHER_GRANT);
    expect((await store.obtain(oldGrant, refreshOld())).token).toBe('shpat_old_grant_access');
    expect(used).toEqual([SHOPIFY_REFRESH_TOKEN]);
    expect(await tokenRows(org.orgId)).toEqual(newGrantOnly);

    // The call holds the refresh lease when the PUT commits: its result is not stored either.
    await put(org, PUBLIC_APP);
    expect((await store.obtain(oldGrant, refreshOld(() => put(org, ANOTHER_GRANT)))).token).toBe('shpat_old_grant_access');
    expect(await tokenRows(org.orgId)).toEqual(newGrantOnly);

    // The new grant's calls take the row, and the old grant's still read nothing of it.
    const fresh = await store.obtain(newGrant, async () => ({ token: 'shpat_new_grant_access', expiresInSec: 3600, refreshToken: 'shprt_new_grant_rotated_0004' }));
    expect(fresh.token).toBe('shpat_new_grant_access');
    const [stored] = await tokenRows(org.orgId);
    expect(stored.grant_id).toBe(newGrant.grantId);
    expect(stored.ciphertext).not.toBeNull();
    expect((await store.obtain(newGrant, () => Promise.reject(new Error('no refresh expected')))).token).toBe('shpat_new_grant_access');
    expect((await store.obtain(oldGrant, refreshOld())).token).toBe('shpat_old_grant_access');
    expect((await tokenRows(org.orgId))[0].ciphertext?.equals(stored.ciphertext!)).toBe(true);
  });
  it('a row of a replaced grant left by an earlier version is taken back by the current grant: refreshed once, then served from the row', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const store = h.t.app.get(VendorTokenStore);
    const oldGrant = grantOf(org.orgId, PUBLIC_APP);
    const newGrant = grantOf(org.orgId, ANOTHER_GRANT);
    await put(org, PUBLIC_APP);
    await store.obtain(oldGrant, async () => ({ token: 'shpat_old_grant_access', expiresInSec: 3600, refreshToken: 'shprt_old_grant_rotated_0003' }));
    const [legacy] = (await h.t.ds.query('SELECT * FROM vendor_tokens WHERE org_id = $1', [org.orgId])) as Record<string, unknown>[];
    await put(org, ANOTHER_GRANT);
    // What an earlier version could leave: credentials of the new grant, the row (and state) of the old one.
    await h.t.ds.query(
      'UPDATE vendor_tokens SET grant_id = $2, key_id = $3, iv = $4, ciphertext = $5, auth_tag = $6, access_expires_at = $7 WHERE org_id = $1',
      [org.orgId, legacy.grant_id, legacy.key_id, legacy.iv, legacy.ciphertext, legacy.auth_tag, legacy.access_expires_at],
    );
    const used: string[] = [];
    const refreshNew = async (refreshToken: string) => {
      used.push(refreshToken);
      return { token: `shpat_new_grant_access_${used.length}`, expiresInSec: 3600, refreshToken: `shprt_new_grant_rotated_000${used.length + 4}` };
    };
    for (let i = 0; i < 3; i++) expect((await store.obtain(newGrant, refreshNew)).token).toBe('shpat_new_grant_access_1');
    expect(used).toEqual([ANOTHER_GRANT.refreshToken]);
    const [row] = await tokenRows(org.orgId);
    expect(row.grant_id).toBe(newGrant.grantId);
    expect(row.ciphertext?.equals(legacy.ciphertext as Buffer)).toBe(false);
    // A call still under the old grant does not take it back: the credentials are the new grant's.
    expect((await store.obtain(oldGrant, async () => ({ token: 'shpat_old_grant_access', expiresInSec: 3600 }))).token).toBe('shpat_old_grant_access');
    expect((await tokenRows(org.orgId))[0].grant_id).toBe(newGrant.grantId);
  });

  it('an access token the vendor gave 50 s (expires_in ≤ 60) is read from the row by the next call, not refreshed again at once', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const store = h.t.app.get(VendorTokenStore);
    await put(org, PUBLIC_APP);
    const grant = grantOf(org.orgId, PUBLIC_APP);
    let refreshes = 0;
    const refresh = async () => {
      refreshes += 1;
      return { token: `shpat_short_lived_access_${refreshes}`, expiresInSec: 50, refreshToken: `shprt_short_lived_rotated_000${refreshes}` };
    };
    expect((await store.obtain(grant, refresh)).token).toBe('shpat_short_lived_access_1');
    // Refreshed at half its life (25 s), as TokenCache does: with a fixed 60 s margin every call refreshed it.
    expect((await store.obtain(grant, refresh)).token).toBe('shpat_short_lived_access_1');
    expect(refreshes).toBe(1);
  });
});

