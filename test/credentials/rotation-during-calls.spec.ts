import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { credentialAad, CredentialsService } from '../../src/credentials/credentials.service.js';
import { KeyRotationService } from '../../src/credentials/key-rotation.service.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { adminAuth } from '../support/test-app.js';
import { call, rowOf, waitFor } from '../executor/support.js';

/**
 * README "Rotating the master key": every replica runs with k2 active and k1 still loaded (step 1 done), then the
 * operator runs `credentials:rotate` (step 2) while agents keep calling. The rotation only re-encrypts the same
 * configs; no admin replaced or deleted anything, so a call holding a config across a wait still sends it (the stamp it
 * held, a fingerprint keyed by the active master key, changed; the config did not).
 */
const BOTH_KEYS = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' };
const RULES = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }];
const k1Only = new EnvelopeCipher({ activeKeyId: 'k1', keys: new Map([['k1', Buffer.from(TEST_MASTER_KEY, 'base64')]]) });

describe('master-key rotation (credentials:rotate) with live traffic', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ ...BOTH_KEYS, VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The org's config as a PUT made before the switch to k2 left it: sealed (and fingerprinted) under k1. */
  async function sealUnderK1(org: OrgSetup, type: 'shopify' | 'nango', config: Record<string, unknown>): Promise<void> {
    const aad = credentialAad(org.orgId, type);
    const env = k1Only.encryptJson(config, aad);
    await h.t.ds.query(
      'UPDATE integration_credentials SET key_id = $3, iv = $4, ciphertext = $5, auth_tag = $6, fingerprint = $7 WHERE org_id = $1 AND integration_type = $2',
      [org.orgId, type, env.keyId, env.iv, env.ciphertext, env.authTag, k1Only.fingerprint(config, aad)],
    );
    h.t.app.get(CredentialsService).clearCache();
  }

  const rotate = () => new KeyRotationService(h.t.ds, h.t.app.get(EnvelopeCipher), new LedgerEventsService(h.t.ds)).rotate();

  /**
   * An org whose shopify config is sealed under k1, with another refund of order 1001 holding its lease for 1.5 s (as
   * in shopify-refunds.spec "a lease left by a holder that died").
   */
  async function orgWithLeasedOrder(): Promise<OrgSetup> {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: RULES });
    await sealUnderK1(org, 'shopify', { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId) });
    await h.t.ds.query(
      `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until) VALUES ($1, $2, '1001', $3, now() + interval '1500 milliseconds')`,
      [org.orgId, shopDomainOf(org.orgId), randomUUID()],
    );
    return org;
  }

  /** A refund of order 1001, once it has read the order and waits for the lease. */
  async function refundWaitingForLease(org: OrgSetup) {
    const from = h.emu.requests.length;
    const pending = Promise.resolve(call(h, org, 'shopify_refund', { action: 'create', orderId: '1001', amount: '1.00' }));
    await waitFor(() => h.emu.requests.slice(from).some((r) => r.vendor === 'shopify' && r.finishedAt !== undefined)); // the order read
    return { from, pending };
  }

  it('a refund waiting for its order\'s lease while the rotation runs is sent once the lease is free (the credentials were not replaced)', async () => {
    const { pending } = await refundWaitingForLease(await orgWithLeasedOrder());
    const summary = await rotate(); // the operator's `npm run credentials:rotate`
    expect(summary.credentials.rotated).toBeGreaterThanOrEqual(1);
    const res = await pending;
    const row = await rowOf(h, res.body.toolCallId as string);
    // Not failed / CREDENTIALS_INVALID "the org's shopify credentials were replaced while this refund waited
    // for the order", with the model told "The vendor rejected this organization's credentials ... retrying will not help".
    expect({ status: res.body.status, errorCode: res.body.errorCode, errorText: row.error_text }, JSON.stringify(res.body.toolResult)).toEqual({ status: 'succeeded', errorCode: null, errorText: null });
  });

  it('a refund waiting for its lease while an admin PUTs another token is sent with neither (the config did change)', async () => {
    const org = await orgWithLeasedOrder();
    const { from, pending } = await refundWaitingForLease(org);
    const put = await h.t.http
      .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
      .set(adminAuth)
      .send({ config: { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId), accessToken: `shpat_${'1'.repeat(32)}` } });
    expect(put.status).toBe(200);
    const res = await pending;
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
    expect((await rowOf(h, res.body.toolCallId as string)).error_text).toMatch(/replaced while this refund waited/);
    expect(h.emu.requests.slice(from).filter((r) => r.body.includes('refundCreate'))).toHaveLength(0);
  });

  it('control: the same refund with the same lease and no rotation is sent once the lease is free', async () => {
    const res = await call(h, await orgWithLeasedOrder(), 'shopify_refund', { action: 'create', orderId: '1001', amount: '1.00' });
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
  });

  it('a read waiting out a Retry-After while the rotation runs still sends its retry (the credentials were not replaced)', async () => {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
    await sealUnderK1(org, 'nango', CREDENTIALS.nango);
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 503, headers: { 'retry-after': '2' }, times: 1 });
    const gets = () => h.emu.requests.filter((r) => r.vendor === 'nango' && r.method === 'GET').length;
    const before = gets();
    const pending = Promise.resolve(call(h, org, 'nango_proxy', { action: 'get', path: 'v1/notes' }));
    await waitFor(() => gets() > before);
    await rotate();
    const res = await pending;
    // Not a retry never sent and the call ended failed / VENDOR_ERROR (the 503), as if an admin had replaced the credentials.
    expect({ status: res.body.status, sent: gets() - before }).toEqual({ status: 'succeeded', sent: 2 });
  });
});
