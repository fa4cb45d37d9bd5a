import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { vendorTokenAad } from '../../src/credentials/vendor-token.store.js';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { emulatorEnv, setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN } from '../support/secrets.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { rowOf } from './support.js';

/**
 * A public app's expiring offline tokens (VENDORS.md §1.1, mandatory from 1 Jan
 * 2027): a 1 h access token, refreshed with a refresh token that Shopify
 * replaces on every use. The emulator enforces the rotation: using a refresh
 * token retires the one before it, so a gateway that failed to keep the
 * replacement, or refreshed twice at once, gets invalid_grant.
 */
describe('Shopify expiring offline tokens (rotating refresh tokens)', () => {
  let h: Harness;
  let replica: TestApp;
  let shop: ShopifyEmulator;
  const tokenRequests = () => h.emu.count({ vendor: 'shopify', path: /^\/admin\/oauth\/access_token$/ });

  beforeAll(async () => {
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '50' });
    // A second gateway on the same database and emulator: another replica, with its own memory.
    replica = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500', VENDOR_CONCURRENCY_LIMIT: '50' });
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });
  beforeEach(() => shop.reset());

  async function publicAppOrg(refreshToken = SHOPIFY_REFRESH_TOKEN): Promise<OrgSetup> {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    await configure(org, refreshToken);
    return org;
  }

  async function configure(org: OrgSetup, refreshToken: string): Promise<void> {
    const put = await h.t.http
      .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
      .set({ Authorization: `Bearer ${org.adminKey}` })
      .send({ config: { shopDomain: 'acme-emulator.myshopify.com', clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(JSON.stringify(put.body)).not.toContain(refreshToken);
  }

  const lookup = (org: OrgSetup, via: TestApp = h.t) =>
    via.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set({ Authorization: `Bearer ${org.agentKey}` })
      .send({ type: 'tool_use', id: `toolu_rt_${Date.now()}_${Math.random().toString(36).slice(2)}`, name: 'order_lookup', input: { action: 'lookup', orderId: '12345' } });

  /** The stored token state, decrypted with the gateway's own key. */
  async function stored(orgId: string): Promise<{ refreshToken: string; accessToken: string; previousRefreshToken?: string } | null> {
    const [row] = (await h.t.ds.query('SELECT key_id, iv, ciphertext, auth_tag FROM vendor_tokens WHERE org_id = $1', [orgId])) as {
      key_id: string | null; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer;
    }[];
    if (!row?.key_id) return null;
    return h.t.app.get(EnvelopeCipher).decryptJson({ keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag }, vendorTokenAad(orgId, 'shopify'));
  }

  it('the first calls refresh once between them; the replacement refresh token is kept encrypted, and no token leaks', async () => {
    const org = await publicAppOrg();
    const first = await Promise.all(Array.from({ length: 10 }, () => lookup(org)));
    expect(first.map((r) => `${r.status} ${r.body.status}`)).toEqual(Array(10).fill('200 succeeded'));
    expect(shop.refreshGrants).toBe(1);
    const state = await stored(org.orgId);
    expect(state?.refreshToken).toBe(shop.latestRefreshToken);
    expect(state?.refreshToken).not.toBe(SHOPIFY_REFRESH_TOKEN);

    const secrets = [SHOPIFY_REFRESH_TOKEN, SHOPIFY_CLIENT_SECRET, ...shop.issuedSecrets];
    expect(secrets.length).toBeGreaterThanOrEqual(4);
    const dumps = (await h.t.ds.query(
      `SELECT row_to_json(t)::text AS dump FROM tool_calls t WHERE org_id = $1
       UNION ALL SELECT row_to_json(e)::text FROM runtime_ledger_events e WHERE org_id = $1
       UNION ALL SELECT row_to_json(v)::text FROM vendor_tokens v WHERE org_id = $1`,
      [org.orgId],
    )) as { dump: string }[];
    expect(dumps.length).toBeGreaterThan(20);
    const seen = [...dumps.map((d) => d.dump), ...h.t.logs, ...replica.logs, ...first.map((r) => JSON.stringify(r.body))].join('\n');
    for (const s of secrets) expect(seen).not.toContain(s);
  });

  it('another replica uses the stored token; once it expires, 20 calls across both replicas refresh exactly once, with the replacement', async () => {
    const org = await publicAppOrg();
    expect((await lookup(org)).body.status).toBe('succeeded');
    const elsewhere = await Promise.all(Array.from({ length: 5 }, () => lookup(org, replica)));
    expect(elsewhere.map((r) => r.body.status)).toEqual(Array(5).fill('succeeded'));
    expect(shop.refreshGrants).toBe(1);

    shop.expireGrantedTokens();
    // A slow token endpoint, so both replicas find the token refused while the first refresh is still out.
    h.emu.fault({ vendor: 'shopify', path: /^\/admin\/oauth\/access_token$/, kind: 'delay', delayMs: 300, times: 2 });
    const again = await Promise.all(Array.from({ length: 20 }, (_, i) => lookup(org, i % 2 ? replica : h.t)));
    h.emu.clearFaults();
    expect(again.map((r) => `${r.status} ${r.body.status} ${r.body.errorCode ?? ''}`)).toEqual(Array(20).fill('200 succeeded '));
    expect(shop.refreshGrants).toBe(2);
    // The second refresh used the replacement: the configured token is retired now, and the newest one is stored.
    expect(shop.refreshTokenValid(SHOPIFY_REFRESH_TOKEN)).toBe(false);
    expect((await stored(org.orgId))?.refreshToken).toBe(shop.latestRefreshToken);
    // The renewal happened inside the handler: no executor retries.
    for (const r of again) expect((await rowOf(h, r.body.toolCallId as string)).retry_count).toBe(0);
  });

  it('a refresh answer lost on the way back: the call still succeeds, and the token chain goes on', async () => {
    const org = await publicAppOrg();
    h.emu.fault({ vendor: 'shopify', path: /^\/admin\/oauth\/access_token$/, kind: 'reset_after' });
    const res = await lookup(org);
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
    // Shopify rotated twice (the first answer never arrived); the gateway kept the one it received.
    expect(shop.refreshGrants).toBe(2);
    expect((await stored(org.orgId))?.refreshToken).toBe(shop.latestRefreshToken);
    shop.expireGrantedTokens();
    expect((await lookup(org, replica)).body.status).toBe('succeeded');
    expect(shop.refreshGrants).toBe(3);
  });

  it('a refresh Shopify applies after the gateway gave up on it (an edge 504) retires the stored replacement: the one it replaced brings the chain back', async () => {
    const org = await publicAppOrg();
    // The token request is answered 504 at once, and Shopify applies it 400 ms later: that answer is lost.
    h.emu.fault({ vendor: 'shopify', path: /^\/admin\/oauth\/access_token$/, kind: 'status_then_apply', status: 504, delayMs: 400 });
    expect((await lookup(org)).body.status).toBe('succeeded'); // the executor's retry refreshed again
    await new Promise((r) => setTimeout(r, 700)); // the late refresh lands, retiring the replacement the gateway stored
    const before = await stored(org.orgId);
    expect(shop.refreshTokenValid(before!.refreshToken)).toBe(false);
    shop.expireGrantedTokens();
    const again = await lookup(org);
    expect(again.body.status, JSON.stringify(again.body)).toBe('succeeded');
    const after = await stored(org.orgId);
    expect(after?.refreshToken).toBe(shop.latestRefreshToken);
    shop.expireGrantedTokens();
    expect((await lookup(org, replica)).body.status).toBe('succeeded'); // and the chain goes on from there
  });

  it('a refresh token Shopify refuses → CREDENTIALS_INVALID after one token request, nothing retried, the token not echoed', async () => {
    const revoked = 'shprt_revoked_00000000000000000000';
    const org = await publicAppOrg(revoked);
    const before = tokenRequests();
    const res = await lookup(org);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
    expect(tokenRequests() - before).toBe(1);
    expect(JSON.stringify(res.body) + JSON.stringify(await rowOf(h, res.body.toolCallId as string))).not.toContain(revoked);
    const [lease] = (await h.t.ds.query('SELECT lease_id, ciphertext FROM vendor_tokens WHERE org_id = $1', [org.orgId])) as { lease_id: string | null; ciphertext: Buffer | null }[];
    expect(lease).toEqual({ lease_id: null, ciphertext: null }); // the lease was given back, nothing stored
  });

  it('the same config again keeps the chain; a new install (new refresh token) starts over from it', async () => {
    const org = await publicAppOrg();
    expect((await lookup(org)).body.status).toBe('succeeded');
    await configure(org, SHOPIFY_REFRESH_TOKEN); // unchanged: e.g. an admin re-saving the form
    shop.expireGrantedTokens();
    expect((await lookup(org)).body.status).toBe('succeeded');
    expect(shop.refreshGrants).toBe(2); // the stored replacement was used: the configured token is retired by now

    shop.reset(); // the merchant reinstalls the app: a new grant
    const fresh = shop.installApp();
    await configure(org, fresh);
    const res = await lookup(org);
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
    expect(shop.refreshGrants).toBe(1);
    expect(shop.refreshTokenValid(fresh)).toBe(true); // used once; kept until its replacement is used
    expect((await stored(org.orgId))?.refreshToken).toBe(shop.latestRefreshToken);
  });

  // Found by a reviewer of cryptography: the row's grant_id is plain text and not sealed with the state, so an earlier
  // grant's envelope copied back under the current grant id was handed out as the current grant's token.
  it("an earlier grant's token state copied back under the new grant's id is not used: the new grant refreshes", async () => {
    const org = await publicAppOrg();
    expect((await lookup(org)).body.status).toBe('succeeded');
    const [old] = (await h.t.ds.query('SELECT key_id, iv, ciphertext, auth_tag, access_expires_at FROM vendor_tokens WHERE org_id = $1', [org.orgId])) as Record<string, unknown>[];
    const oldToken = (await stored(org.orgId))?.accessToken;
    expect(oldToken).toBeTruthy();

    shop.reset(); // a new install: a new grant, the row the new grant's with no state
    const fresh = shop.installApp();
    await configure(org, fresh);
    await h.t.ds.query('UPDATE vendor_tokens SET key_id = $2, iv = $3, ciphertext = $4, auth_tag = $5, access_expires_at = $6 WHERE org_id = $1', [
      org.orgId, old.key_id, old.iv, old.ciphertext, old.auth_tag, old.access_expires_at,
    ]);
    const before = tokenRequests();
    const res = await lookup(org);
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
    expect(tokenRequests() - before).toBe(1); // refreshed with the new grant, not the copied token
    expect((await stored(org.orgId))?.accessToken).not.toBe(oldToken);
  });

  it('a replica that died holding the refresh lease delays the others only until the lease runs out', async () => {
    const org = await publicAppOrg();
    // As left by a replica killed between taking the lease and storing the new token (the PUT left the grant's row).
    await h.t.ds.query(
      `UPDATE vendor_tokens SET lease_id = gen_random_uuid(), lease_until = now() + interval '600 milliseconds' WHERE org_id = $1 AND integration_type = 'shopify'`,
      [org.orgId],
    );
    const started = Date.now();
    const res = await lookup(org);
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(shop.refreshGrants).toBe(1);
    expect((await stored(org.orgId))?.refreshToken).toBe(shop.latestRefreshToken);
  });

  it('calls that run out of budget waiting for another replica\'s renewal are the gateway\'s timeouts: they do not open Shopify\'s breaker', async () => {
    const org = await publicAppOrg();
    // A replica hung (or killed) holding the renewal lease for longer than a call's budget (VENDOR_TIMEOUT_MS 2000).
    await h.t.ds.query(
      `UPDATE vendor_tokens SET lease_id = gen_random_uuid(), lease_until = now() + interval '60 seconds' WHERE org_id = $1 AND integration_type = 'shopify'`,
      [org.orgId],
    );
    const sent = h.emu.requests.length;
    const waited = await Promise.all(Array.from({ length: 6 }, () => lookup(org)));
    for (const res of waited) expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
    expect(h.emu.requests.slice(sent).filter((r) => r.vendor === 'shopify')).toEqual([]); // Shopify was never called
    expect((await rowOf(h, waited[0].body.toolCallId)).error_text).toMatch(/while the gateway renewed the access token/);
    // The lease runs out: the next call renews and goes through, no CIRCUIT_OPEN (6 failures ≥ the threshold of 5).
    await h.t.ds.query(`UPDATE vendor_tokens SET lease_until = now() - interval '1 second' WHERE org_id = $1`, [org.orgId]);
    const after = await lookup(org);
    expect(after.body, JSON.stringify(after.body)).toMatchObject({ status: 'succeeded' });
  });

  it('credentials deleted while a call waits for another replica\'s renewal: failed as credentials gone, not as a token store failure', async () => {
    const org = await publicAppOrg();
    await h.t.ds.query(
      `UPDATE vendor_tokens SET lease_id = gen_random_uuid(), lease_until = now() + interval '60 seconds' WHERE org_id = $1 AND integration_type = 'shopify'`,
      [org.orgId],
    );
    const waiting = lookup(org).then((r) => r); // (.then: sent now)
    await new Promise((r) => setTimeout(r, 300));
    const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set({ Authorization: `Bearer ${org.adminKey}` });
    expect(del.status).toBe(204);
    const res = await waiting;
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
    expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/credentials were deleted while this call waited/);
  });

  it('deleting the credentials deletes the stored token state', async () => {
    const org = await publicAppOrg();
    expect((await lookup(org)).body.status).toBe('succeeded');
    expect(await stored(org.orgId)).not.toBeNull();
    const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set({ Authorization: `Bearer ${org.adminKey}` });
    expect(del.status).toBeLessThan(300);
    expect(await h.t.ds.query('SELECT 1 FROM vendor_tokens WHERE org_id = $1', [org.orgId])).toHaveLength(0);
  });
});
