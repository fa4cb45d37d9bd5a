import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/** The secrets these refused configs carry, as values or pasted as keys: never stored, and the run-wide leak scan looks for them too. */
const PASTED_SHOPIFY_TOKEN = 'shpat_0123456789abcdef0123456789abcdef';
const PASTED_SECRET = 'sk-live 0123456789abcdef/+=';
const PASTED_NANGO_SECRET = 'nango_secret_0123456789abcdef';
const SHOPIFY_ACCESS_TOKEN = 'shpat_validtoken1';
const NANGO_SECRET_KEY = 'nango-secret-key-1';
const AMAZON_CLIENT_SECRET = 'secret-value-1';
for (const secret of [PASTED_SHOPIFY_TOKEN, PASTED_SECRET, PASTED_NANGO_SECRET, SHOPIFY_ACCESS_TOKEN, NANGO_SECRET_KEY, AMAZON_CLIENT_SECRET]) {
  recordMintedSecret('credential-errors.spec refused secret', secret);
}

/**
 * A refused credentials config is answered 400 naming what is wrong, but a config is all secrets: the detail names
 * only fields the integration's schema declares, never a value, and never a key it does not know (a token pasted
 * as a key is still a token).
 */
describe('credentials: what a 400 names', () => {
  let t: TestApp;
  let org: string;
  let admin: string;
  const put = (type: string, body: unknown) => t.http.put(`/v1/orgs/${org}/integrations/${type}/credentials`).set(bearer(admin)).send(body as object);

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Credential Errors Co');
    admin = (await createKey(t, org, 'admin')).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a secret pasted as a config key is not echoed, whether or not it looks like an identifier; the known fields are listed instead', async () => {
    for (const pasted of [PASTED_SHOPIFY_TOKEN, PASTED_SECRET, 'webhookUrl']) {
      const res = await put('shopify', { config: { shopDomain: 'errors.myshopify.com', accessToken: SHOPIFY_ACCESS_TOKEN, [pasted]: true } });
      expect([res.status, res.body.code], pasted).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.text, pasted).not.toContain(JSON.stringify(pasted).slice(1, -1));
      expect(res.body.detail).toBe('config: an unknown field is not allowed (known fields: shopDomain, accessToken, clientId, clientSecret, refreshToken, apiVersion)');
    }
    const nango = await put('nango', { config: { secretKey: NANGO_SECRET_KEY, connectionId: 'c', providerConfigKey: 'p', [PASTED_NANGO_SECRET]: 'v' } });
    expect(nango.status).toBe(400);
    expect(nango.text).not.toContain(PASTED_NANGO_SECRET);
    expect(nango.body.detail).toMatch(/^config: an unknown field is not allowed \(known fields: secretKey, connectionId, providerConfigKey\)$/);
  });

  it('a missing or non-object config is "config: …", not "config.config: …"', async () => {
    for (const body of [{}, { config: null }, { config: 'x' }, { config: [] }]) {
      const res = await put('shopify', body);
      expect([res.status, res.body.detail], JSON.stringify(body)).toEqual([400, 'config: must be object']);
    }
  });

  it('a known field still is named: a missing one, or one of the wrong shape (never its value)', async () => {
    const missing = await put('amazon', { config: { clientId: 'id', clientSecret: AMAZON_CLIENT_SECRET, region: 'eu' } });
    expect([missing.status, missing.body.detail]).toEqual([400, "config.refreshToken: must have required property 'refreshToken'"]);
    const shape = await put('shopify', { config: { shopDomain: 'errors.myshopify.com', accessToken: 'short' } });
    expect([shape.status, shape.body.detail]).toEqual([400, 'config.accessToken: must NOT have fewer than 8 characters']);
    expect(shape.text).not.toContain('"short"');
  });
});
