import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { parseAmazonCredentials } from '../../src/vendors/amazon/amazon.credentials.js';
import { parseJumioCredentials } from '../../src/vendors/jumio/jumio.credentials.js';
import { AMAZON_CLIENT_ID, AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, JUMIO_CLIENT_ID, JUMIO_CLIENT_SECRET } from '../support/secrets.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Configs the PUT used to store although no call could use them: a Jumio accountId that is no UUID (it goes into the
 * URL path a call's own accountId must be a UUID for), a Jumio clientId with ':' (no HTTP Basic user-id, RFC 7617 §2),
 * an Amazon marketplaceId of another region than `region`. Each case: the PUT and the handler's reading agree.
 */
const JUMIO = { clientId: JUMIO_CLIENT_ID, clientSecret: JUMIO_CLIENT_SECRET, region: 'emea-1', accountId: '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f' };
const AMAZON = { clientId: AMAZON_CLIENT_ID, clientSecret: AMAZON_CLIENT_SECRET, refreshToken: AMAZON_REFRESH_TOKEN, region: 'na' };
/** Sent in refused values: must never come back. */
const MARKER = 'Zq8vK3';

describe('credentials: vendor configs no call could use are refused at PUT', () => {
  let t: TestApp;
  let org: string;
  const put = (type: string, config: Record<string, unknown>) => t.http.put(`/v1/orgs/${org}/integrations/${type}/credentials`).set(adminAuth).send({ config });

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Vendor config checks');
  });
  afterAll(async () => {
    await t?.close();
  });

  const cases: { what: string; type: 'jumio' | 'amazon'; config: Record<string, unknown>; field: string; ok: boolean; marker?: string }[] = [
    { what: 'jumio accountId: 36 dashes', type: 'jumio', config: { ...JUMIO, accountId: '-'.repeat(36) }, field: 'accountId', ok: false },
    { what: 'jumio accountId: 36 hex digits', type: 'jumio', config: { ...JUMIO, accountId: '0123456789abcdef0123456789abcdef0123' }, field: 'accountId', ok: false },
    { what: 'jumio accountId: dashes misplaced', type: 'jumio', config: { ...JUMIO, accountId: '0123-4567-89ab-cdef-0123-4567-89abcd' }, field: 'accountId', ok: false },
    { what: 'jumio accountId: a UUID with a newline', type: 'jumio', config: { ...JUMIO, accountId: `${JUMIO.accountId}\n` }, field: 'accountId', ok: false },
    { what: 'jumio accountId: upper-case UUID', type: 'jumio', config: { ...JUMIO, accountId: JUMIO.accountId.toUpperCase() }, field: 'accountId', ok: true },
    { what: 'jumio clientId with a colon', type: 'jumio', config: { ...JUMIO, clientId: `acme:${MARKER}` }, field: 'clientId', ok: false, marker: MARKER },
    { what: 'jumio clientId that is only a colon', type: 'jumio', config: { ...JUMIO, clientId: ':' }, field: 'clientId', ok: false },
    { what: 'jumio clientId with a colon after blanks', type: 'jumio', config: { ...JUMIO, clientId: ` x ${MARKER}:` }, field: 'clientId', ok: false, marker: MARKER },
    { what: 'jumio clientId with inner blanks', type: 'jumio', config: { ...JUMIO, clientId: ' acme client ' }, field: 'clientId', ok: true },
    { what: 'jumio clientSecret with a colon (allowed in the password)', type: 'jumio', config: { ...JUMIO, clientSecret: 'sec:ret-value' }, field: 'clientSecret', ok: true },
    { what: 'amazon: a marketplace of eu under na', type: 'amazon', config: { ...AMAZON, marketplaceId: 'A1PA6795UKMFR9' }, field: 'marketplaceId', ok: false },
    { what: 'amazon: a marketplace of na under fe', type: 'amazon', config: { ...AMAZON, region: 'fe', marketplaceId: 'ATVPDKIKX0DER' }, field: 'marketplaceId', ok: false },
    { what: 'amazon: a marketplace of fe under eu', type: 'amazon', config: { ...AMAZON, region: 'eu', marketplaceId: 'A1VC38T7YXB528' }, field: 'marketplaceId', ok: false },
    { what: 'amazon: no marketplace Amazon publishes', type: 'amazon', config: { ...AMAZON, marketplaceId: 'ZQ8VK3NOTAMARKET' }, field: 'marketplaceId', ok: false, marker: 'ZQ8VK3NOTAMARKET' },
    { what: 'amazon: US under na', type: 'amazon', config: { ...AMAZON, marketplaceId: 'ATVPDKIKX0DER' }, field: 'marketplaceId', ok: true },
    { what: 'amazon: BR under na', type: 'amazon', config: { ...AMAZON, marketplaceId: 'A2Q3Y263D00KWC' }, field: 'marketplaceId', ok: true },
    { what: 'amazon: DE under eu', type: 'amazon', config: { ...AMAZON, region: 'eu', marketplaceId: 'A1PA6795UKMFR9' }, field: 'marketplaceId', ok: true },
    { what: 'amazon: IN under eu', type: 'amazon', config: { ...AMAZON, region: 'eu', marketplaceId: 'A21TJRUUN4KGV' }, field: 'marketplaceId', ok: true },
    { what: 'amazon: IE under eu', type: 'amazon', config: { ...AMAZON, region: 'eu', marketplaceId: 'A28R8C7NBKEWEA' }, field: 'marketplaceId', ok: true },
    { what: 'amazon: JP under fe', type: 'amazon', config: { ...AMAZON, region: 'fe', marketplaceId: 'A1VC38T7YXB528' }, field: 'marketplaceId', ok: true },
    { what: 'amazon: no marketplaceId', type: 'amazon', config: { ...AMAZON }, field: 'marketplaceId', ok: true },
  ];

  it.each(cases)('$what: ok = $ok, and the handler reads it alike', async ({ type, config, field, ok, marker }) => {
    // The handler refuses what never worked (a Jumio accountId or clientId no call can use); an Amazon marketplaceId no
    // call reads is kept as stored, so a config stored before the PUT checked it goes on working.
    const parsed = type === 'amazon' ? parseAmazonCredentials(config) : parseJumioCredentials(config);
    expect('invalidField' in parsed ? parsed.invalidField : null).toBe(ok || type === 'amazon' ? null : field);
    const res = await put(type, config);
    if (ok) {
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return;
    }
    expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(res.body.detail).toContain(`config.${field}`);
    if (marker !== undefined) expect(res.text).not.toContain(marker);
  });

  it("a Shopify app's client secret or refresh token pasted as accessToken is refused, naming what it is, never echoed", async () => {
    const secret = `shpss_${MARKER}0123456789abcdef0123456789ab`;
    const refresh = `shprt_${MARKER}0123456789abcdef0123456789ab`;
    for (const [value, says] of [
      [secret, /client secret \(shpss_…\).*send it as clientSecret/],
      [refresh, /refresh token \(shprt_…\).*send it as refreshToken/],
    ] as const) {
      const res = await put('shopify', { shopDomain: 'acme.myshopify.com', accessToken: value });
      expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.detail).toMatch(says);
      expect(res.text).not.toContain(MARKER);
    }
    // An Admin API token, and the secret where it belongs, are stored.
    expect((await put('shopify', { shopDomain: 'acme.myshopify.com', accessToken: `shpat_${'0'.repeat(32)}` })).status).toBe(200);
    expect((await put('shopify', { shopDomain: 'acme.myshopify.com', clientId: 'app-client-id', clientSecret: secret })).status).toBe(200);
  });

  it('a Jumio accountId is stored in lower case: either spelling is one config, with one fingerprint', async () => {
    const upper = await put('jumio', { ...JUMIO, accountId: JUMIO.accountId.toUpperCase() });
    expect(upper.status).toBe(200);
    expect(await t.app.get(CredentialsService).load(org, 'jumio')).toEqual(JUMIO);
    const lower = await put('jumio', JUMIO);
    expect(lower.body.fingerprint).toBe(upper.body.fingerprint);
  });
});
