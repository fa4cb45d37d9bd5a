import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, type Harness, verifyLedger } from '../support/scenario.js';
import { TEST_MASTER_KEY } from '../support/secrets.js';
import { adminAuth } from '../support/test-app.js';

interface StoredRow { key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer; fingerprint: string }

/**
 * An earlier ciphertext of an org's credentials put back under the current key id and fingerprint (a writer of the
 * table, without the master key): the gateway then uses the replaced credentials. GET /v1/ledger/verify finds it by
 * opening the row; the ledger:verify CLI opened nothing and answered ok, exit 0. With the gateway's keys it now opens
 * the row too (exit 1); without them it says on stderr that this check was left out.
 */
describe('ledger:verify of credentials put back from an earlier ciphertext', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
  });

  const rowOf = async (orgId: string): Promise<StoredRow> =>
    ((await h.t.ds.query(`SELECT key_id, iv, ciphertext, auth_tag, fingerprint FROM integration_credentials WHERE org_id = $1 AND integration_type = 'shopify'`, [orgId])) as StoredRow[])[0]!;

  it('the CLI reports the break the API reports', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const old = await rowOf(org.orgId);
    const replacement = { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId), accessToken: 'shpat_replacement_0000000000000000' };
    expect((await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: replacement })).status).toBe(200);
    await h.t.ds.query(`UPDATE integration_credentials SET iv = $2, ciphertext = $3, auth_tag = $4 WHERE org_id = $1 AND integration_type = 'shopify'`, [
      org.orgId, old.iv, old.ciphertext, old.auth_tag,
    ]);
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: false }); // the API sees it

    const out: string[] = [];
    const err: string[] = [];
    const env = { DATABASE_URL: process.env.DATABASE_URL, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY };
    const code = await ledgerVerifyCommand(['--org', org.orgId], env, { out: (l) => out.push(l), err: (l) => err.push(l) });
    expect(code, `CLI: ${out.join('\n')} ${err.join('\n')}`).toBe(1);
    expect(JSON.parse(out.join(''))).toMatchObject({ ok: false, brokenAt: { reason: expect.stringContaining('credentials') } });
    expect(err.join('\n')).not.toContain('not opened');

    // Without the keys (and no development key file in DATA_DIR), the check is left out, and said.
    const out2: string[] = [];
    const err2: string[] = [];
    const keyless = { DATABASE_URL: process.env.DATABASE_URL, DATA_DIR: '/nonexistent-tgw-data-dir' };
    const code2 = await ledgerVerifyCommand(['--org', org.orgId], keyless, { out: (l) => out2.push(l), err: (l) => err2.push(l) });
    expect({ code2, out: JSON.parse(out2.join('')).ok }).toEqual({ code2: 0, out: true });
    expect(err2.join('\n')).toContain('not opened and held to their events');
    expect(err2.join('\n')).not.toContain(TEST_MASTER_KEY);
  });
});
