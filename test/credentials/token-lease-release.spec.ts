import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { vendorTokenAad, VendorTokenStore } from '../../src/credentials/vendor-token.store.js';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { shopifyGrant } from '../../src/vendors/shopify/shopify.auth.js';
import type { ShopifyConnection } from '../../src/vendors/shopify/shopify.connection.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN, SHOPIFY_TOKEN } from '../support/secrets.js';

const SHOP = 'acme-emulator.myshopify.com';
const PUBLIC_APP = { shopDomain: SHOP, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken: SHOPIFY_REFRESH_TOKEN };
/** The harness's VENDOR_TIMEOUT_MS (startHarness). */
const VENDOR_TIMEOUT_MS = 2_000;

// The secrets this spec's stand-in refreshes hand out: the run-wide leak scan looks for them too.
const STAND_INS = {
  unstoredAccess: 'shpat_lease_spec_unstored_access_0001',
  unstoredRefresh: 'shprt_lease_spec_unstored_rotated_0002',
  nextAccess: 'shpat_lease_spec_next_access_0003',
  nextRefresh: 'shprt_lease_spec_next_rotated_0004',
  cappedRefresh: 'shprt_lease_spec_capped_rotated_0005',
  heldAccess: 'shpat_lease_spec_held_access_0006',
};
for (const secret of Object.values(STAND_INS)) recordMintedSecret('token-lease-release.spec stand-in secret', secret);

interface LeaseRow {
  lease_id: string | null;
  held: boolean | null;
  ciphertext: Buffer | null;
  remaining_sec: number | null;
}

/**
 * The refresh lease of a rotating grant (vendor_tokens) is given back however the refresh ends: also when the
 * vendor answered but its result could not be stored, or the other replicas would wait out the whole lease for a
 * token that never lands and then fail. And a token's lifetime as the vendor states it is capped before it
 * reaches the store, so an absurd expires_in is stored as a day instead of failing every write.
 */
describe('vendor token lease and lifetime', () => {
  let h: Harness;
  let shop: ShopifyEmulator;

  beforeAll(async () => {
    h = await startHarness();
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterAll(async () => {
    await h?.close();
  });

  async function publicAppOrg(): Promise<OrgSetup> {
    shop.reset();
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const res = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set({ Authorization: `Bearer ${org.adminKey}` }).send({ config: PUBLIC_APP });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return org;
  }
  const grantOf = (orgId: string) => shopifyGrant(orgId, { shopDomain: SHOP } as ShopifyConnection, { kind: 'refresh', ...PUBLIC_APP });
  const leaseRow = async (orgId: string): Promise<LeaseRow> => {
    const [row] = (await h.t.ds.query(
      `SELECT lease_id, lease_until > now() AS held, ciphertext, extract(epoch FROM access_expires_at - now())::float8 AS remaining_sec
         FROM vendor_tokens WHERE org_id = $1 AND integration_type = 'shopify'`,
      [orgId],
    )) as LeaseRow[];
    return row;
  };

  it('a refresh whose state write fails gives the lease back: the next caller refreshes at once instead of waiting it out', async () => {
    const org = await publicAppOrg();
    const store = h.t.app.get(VendorTokenStore);
    const grant = grantOf(org.orgId);
    // A refresh answering a lifetime the database cannot add to now(): the token is good, its UPDATE fails.
    const got = await store.obtain(grant, async () => ({ token: STAND_INS.unstoredAccess, expiresInSec: 1e15, refreshToken: STAND_INS.unstoredRefresh }));
    expect(got.token).toBe(STAND_INS.unstoredAccess);
    const after = await leaseRow(org.orgId);
    expect(after.ciphertext).toBeNull(); // the write did fail
    expect(after.lease_id).toBeNull();
    expect(after.held).not.toBe(true);

    // Another replica needing a token now: it takes the lease and refreshes with the refresh token still stored
    // (none: the configured one), without waiting for a lease of 2 × VENDOR_TIMEOUT_MS + 5 s.
    const used: string[] = [];
    const started = Date.now();
    const next = await store.obtain(grant, async (refreshToken) => {
      used.push(refreshToken);
      return { token: STAND_INS.nextAccess, expiresInSec: 3600, refreshToken: STAND_INS.nextRefresh };
    });
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(next.token).toBe(STAND_INS.nextAccess);
    expect(used).toEqual([SHOPIFY_REFRESH_TOKEN]);
    const stored = await leaseRow(org.orgId);
    expect(stored).toMatchObject({ lease_id: null, held: null });
    expect(stored.ciphertext).not.toBeNull();
    expect(stored.remaining_sec).toBeGreaterThan(3_500);
  });

  it('an expires_in of 1e15 from the token endpoint is stored as a day, and the call succeeds', async () => {
    const org = await publicAppOrg();
    const tokenPath = /^\/admin\/oauth\/access_token$/;
    // Shopify answering the refresh with an absurd lifetime (the emulator's static token, so the lookup works with it).
    h.emu.fault({
      vendor: 'shopify',
      path: tokenPath,
      kind: 'status',
      status: 200,
      body: { access_token: SHOPIFY_TOKEN, expires_in: 1e15, refresh_token: STAND_INS.cappedRefresh, scope: 'read_orders' },
    });
    const before = h.emu.count({ vendor: 'shopify', path: tokenPath });
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ Authorization: `Bearer ${org.agentKey}` }).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.body.status, JSON.stringify(call.body)).toBe('succeeded');
    expect(h.emu.count({ vendor: 'shopify', path: tokenPath }) - before).toBe(1);

    const row = await leaseRow(org.orgId);
    expect(row.lease_id).toBeNull();
    expect(row.ciphertext).not.toBeNull(); // stored, not lost to an overflowing interval
    expect(row.remaining_sec).toBeGreaterThan(86_400 - 60);
    expect(row.remaining_sec).toBeLessThanOrEqual(86_400);
    const [enc] = (await h.t.ds.query('SELECT key_id, iv, ciphertext, auth_tag FROM vendor_tokens WHERE org_id = $1', [org.orgId])) as {
      key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer;
    }[];
    const state = h.t.app.get(EnvelopeCipher).decryptJson<{ refreshToken: string; accessToken: string }>(
      { keyId: enc.key_id, iv: enc.iv, ciphertext: enc.ciphertext, authTag: enc.auth_tag },
      vendorTokenAad(org.orgId, 'shopify'),
    );
    expect(state).toMatchObject({ refreshToken: STAND_INS.cappedRefresh, accessToken: SHOPIFY_TOKEN });

    // Another replica reads the stored token, with the capped lifetime, and refreshes nothing.
    let refreshed = false;
    const again = await h.t.app.get(VendorTokenStore).obtain(grantOf(org.orgId), async () => {
      refreshed = true;
      return { token: STAND_INS.heldAccess, expiresInSec: 3600 };
    });
    expect(refreshed).toBe(false);
    expect(again.token).toBe(SHOPIFY_TOKEN);
    expect(again.expiresInSec).toBeLessThanOrEqual(86_400);
  });

  it('the lease covers two refreshes (the stored refresh token refused, then the one it replaced) plus the write', async () => {
    const org = await publicAppOrg();
    let leaseSec: number | undefined;
    await h.t.app.get(VendorTokenStore).obtain(grantOf(org.orgId), async () => {
      const [row] = (await h.t.ds.query(`SELECT extract(epoch FROM lease_until - now())::float8 AS sec FROM vendor_tokens WHERE org_id = $1`, [org.orgId])) as { sec: number }[];
      leaseSec = row.sec;
      return { token: STAND_INS.heldAccess, expiresInSec: 3600 };
    });
    expect(leaseSec).toBeGreaterThan((2 * VENDOR_TIMEOUT_MS + 5_000) / 1000 - 1);
    expect(leaseSec).toBeLessThanOrEqual((2 * VENDOR_TIMEOUT_MS + 5_000) / 1000);
  });
});
