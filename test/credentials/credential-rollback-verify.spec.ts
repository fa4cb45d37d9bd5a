import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { credentialAad } from '../../src/credentials/credentials.service.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, type Harness, verifyLedger } from '../support/scenario.js';
import { adminAuth } from '../support/test-app.js';

interface StoredRow { key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer; fingerprint: string }

/**
 * The live credentials row against the org's last credentials event for the integration: an earlier ciphertext of the
 * same org and integration put back (it still opens: its associated data names the org and integration only), a row
 * left after a delete, or one gone after a put, is a break. A rotation's re-encryption and new fingerprint is not.
 */
describe('verify: credentials rows against their events', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = (orgId: string) => verifyLedger(h.t, orgId);
  const rowOf = async (orgId: string): Promise<StoredRow | undefined> =>
    ((await h.t.ds.query(`SELECT key_id, iv, ciphertext, auth_tag, fingerprint FROM integration_credentials WHERE org_id = $1 AND integration_type = 'shopify'`, [orgId])) as StoredRow[])[0];
  const putRow = (orgId: string, r: StoredRow) =>
    h.t.ds.query(
      `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, 'shopify', $2, $3, $4, $5, $6)
       ON CONFLICT (org_id, integration_type) DO UPDATE SET key_id = $2, iv = $3, ciphertext = $4, auth_tag = $5, fingerprint = $6`,
      [orgId, r.key_id, r.iv, r.ciphertext, r.auth_tag, r.fingerprint],
    );
  const replacement = (orgId: string) => ({ ...CREDENTIALS.shopify, shopDomain: shopDomainOf(orgId), accessToken: 'shpat_replacement_0000000000000000' });

  it('an older ciphertext put back, a row left after a delete, and a row gone after a put are breaks', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const old = (await rowOf(org.orgId))!;
    expect((await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: replacement(org.orgId) })).status).toBe(200);
    const current = (await rowOf(org.orgId))!;
    expect((await verify(org.orgId)).ok).toBe(true);

    await putRow(org.orgId, old);
    const v = await verify(org.orgId);
    expect(v.ok).toBe(false);
    expect(v.brokenAt?.reason).toContain('differ from the ones their last event on the ledger stored');
    await putRow(org.orgId, current);
    expect((await verify(org.orgId)).ok).toBe(true);

    await h.t.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1 AND integration_type = 'shopify'`, [org.orgId]);
    expect((await verify(org.orgId)).brokenAt?.reason).toContain('are missing');
    await putRow(org.orgId, current);

    expect((await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth)).status).toBe(204);
    expect((await verify(org.orgId)).ok).toBe(true);
    await putRow(org.orgId, current);
    expect((await verify(org.orgId)).brokenAt?.reason).toContain('last event on the ledger deleted them');
  });

  it('a row re-encrypted and re-fingerprinted by a rotation (credentials.rotated) is no break; a rollback to before it is', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const before = (await rowOf(org.orgId))!;
    // As KeyRotationService writes a batch: the row under the active key with its fingerprint recomputed, and the
    // org's credentials.rotated event, in one transaction (the fingerprint form changed: it differs from the put's).
    const cipher = h.t.app.get(EnvelopeCipher);
    const config = { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId) };
    const env = cipher.encryptJson(config, credentialAad(org.orgId, 'shopify'));
    await h.t.ds.transaction(async (m) => {
      await m.query(`UPDATE integration_credentials SET key_id = $2, iv = $3, ciphertext = $4, auth_tag = $5, fingerprint = $6 WHERE org_id = $1 AND integration_type = 'shopify'`,
        [org.orgId, env.keyId, env.iv, env.ciphertext, env.authTag, 'fp2:rotated-form']);
      await h.t.app.get(LedgerEventsService).append([{ orgId: org.orgId, type: 'credentials.rotated', metadata: { toKeyId: env.keyId, credentials: 1, results: 0, inputs: 0 } }], m);
    });
    expect((await verify(org.orgId)).ok).toBe(true);
    // A rotation of the org's other rows only (credentials: 0) vouches for no credentials row.
    await h.t.app.get(LedgerEventsService).append([{ orgId: org.orgId, type: 'credentials.rotated', metadata: { toKeyId: 'other-key', credentials: 0, results: 2, inputs: 0 } }]);
    await putRow(org.orgId, { ...before, key_id: 'other-key', fingerprint: 'fp2:forged' });
    expect((await verify(org.orgId)).ok).toBe(false);
  });

  // Found by a reviewer of cryptography: verify compared the row's fingerprint and key id columns only, so an earlier
  // ciphertext put back under the current fingerprint was used by the gateway while verify said intact.
  it('an older ciphertext put back under the current fingerprint and key id is a break: the sealed config itself is checked', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const old = (await rowOf(org.orgId))!;
    expect((await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: replacement(org.orgId) })).status).toBe(200);
    const current = (await rowOf(org.orgId))!;
    expect((await verify(org.orgId)).ok).toBe(true);
    // Only the envelope goes back; key_id (no rotation) and fingerprint stay as the last PUT left them.
    await putRow(org.orgId, { ...current, iv: old.iv, ciphertext: old.ciphertext, auth_tag: old.auth_tag });
    const v = await verify(org.orgId);
    expect(v.ok).toBe(false);
    expect(v.brokenAt?.reason).toContain('(the config sealed in the row)');
    // A ciphertext that does not open (a forged tag) is one too.
    await putRow(org.orgId, { ...current, auth_tag: Buffer.alloc(16) });
    expect((await verify(org.orgId)).brokenAt?.reason).toContain('(they do not open under their key id)');
    await putRow(org.orgId, current);
    expect((await verify(org.orgId)).ok).toBe(true);
  });
});
