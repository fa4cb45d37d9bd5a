import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecryptionError } from '../../src/common/crypto/envelope-cipher.js';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import type { IntegrationType } from '../../src/credentials/integration-credential.entity.js';
import {
  AMAZON_CLIENT_ID,
  AMAZON_CLIENT_SECRET,
  AMAZON_REFRESH_TOKEN,
  JUMIO_CLIENT_ID,
  JUMIO_CLIENT_SECRET,
  NANGO_SECRET_KEY,
  SHOPIFY_CLIENT_ID,
  SHOPIFY_CLIENT_SECRET,
  SHOPIFY_REFRESH_TOKEN,
  SHOPIFY_TOKEN,
  TEST_MASTER_KEY,
} from '../support/secrets.js';
import { callContext, emulatorEndpoints, failure } from '../../src/vendors/handler.spec-support.js';
import { parseAmazonCredentials } from '../../src/vendors/amazon/amazon.credentials.js';
import { parseJumioCredentials } from '../../src/vendors/jumio/jumio.credentials.js';
import { NangoHandler } from '../../src/vendors/nango/nango.handler.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/** A valid config per integration type (API.md §7), each carrying test secrets. */
const CONFIGS: Record<IntegrationType, Record<string, string>> = {
  shopify: { shopDomain: 'acme-store.myshopify.com', accessToken: SHOPIFY_TOKEN, apiVersion: '2026-07' },
  amazon: { clientId: AMAZON_CLIENT_ID, clientSecret: AMAZON_CLIENT_SECRET, refreshToken: AMAZON_REFRESH_TOKEN, region: 'eu', marketplaceId: 'A1PA6795UKMFR9' },
  jumio: { clientId: JUMIO_CLIENT_ID, clientSecret: JUMIO_CLIENT_SECRET, region: 'emea-1', accountId: '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f' },
  nango: { secretKey: NANGO_SECRET_KEY, connectionId: 'conn-acme-1', providerConfigKey: 'hubspot' },
};
const TYPES = Object.keys(CONFIGS) as IntegrationType[];
/** Secrets of configs only some tests PUT: an attacker's token (refused) and a guessable client secret (stored). */
const ATTACKER_TOKEN = 'shpat_attacker_token';
const GUESSABLE_SECRET = 'Summer2026!';
recordMintedSecret('credentials.spec attacker token', ATTACKER_TOKEN); // the run-wide leak scan looks for them too
recordMintedSecret('credentials.spec guessable client secret', GUESSABLE_SECRET);
/** Values that must never come back: the secrets, and markers sent in rejected configs. */
const SHORT_MARKER = 'Qx7!mZ';
const DOMAIN_MARKER = 'leak-marker-7f3a.example.org';
const SECRETS = [SHOPIFY_TOKEN, SHOPIFY_CLIENT_SECRET, AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, JUMIO_CLIENT_SECRET, NANGO_SECRET_KEY, TEST_MASTER_KEY, SHORT_MARKER, DOMAIN_MARKER];

function expectNoSecret(text: string, where: string): void {
  for (const s of SECRETS) {
    expect(text.includes(s), `${where} contains a secret`).toBe(false);
    expect(text.includes(Buffer.from(s).toString('hex')), `${where} contains a secret (hex)`).toBe(false);
  }
}

describe('credentials: write-only, encrypted, bound to org and integration', () => {
  let t: TestApp;
  let orgA: string;
  let orgB: string;
  let adminA: string;
  let adminB: string;
  const url = (org: string, type: string) => `/v1/orgs/${org}/integrations/${type}/credentials`;

  beforeAll(async () => {
    t = await startTestApp();
    orgA = await createOrg(t, 'Creds A');
    orgB = await createOrg(t, 'Creds B');
    adminA = (await createKey(t, orgA, 'admin')).key;
    adminB = (await createKey(t, orgB, 'admin')).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('stores each type and answers {integrationType, keyId, fingerprint, updatedAt} without the secret', async () => {
    for (const type of TYPES) {
      const res = await t.http.put(url(orgA, type)).set(bearer(adminA)).send({ config: CONFIGS[type] });
      expect(res.status, `${type}: ${JSON.stringify(res.body)}`).toBe(200);
      expect(Object.keys(res.body as object).sort()).toEqual(['fingerprint', 'integrationType', 'keyId', 'updatedAt']);
      expect(res.body).toMatchObject({ integrationType: type, keyId: 'k1' });
      expect(res.body.fingerprint).toMatch(/^hmac-v2:[0-9a-f]{16}$/);
      expect(new Date(res.body.updatedAt as string).toISOString()).toBe(res.body.updatedAt);
      expectNoSecret(res.text, `PUT ${type} response`);
    }
    const svc = t.app.get(CredentialsService);
    svc.clearCache();
    for (const type of TYPES) expect(await svc.load(orgA, type)).toEqual(CONFIGS[type]);
  });

  it('replaces a config on a second PUT (new fingerprint) and lists metadata only', async () => {
    const first = await t.http.get(`/v1/orgs/${orgA}/integrations`).set(adminAuth);
    const before = (first.body as { items: { integrationType: string; fingerprint: string }[] }).items.find((i) => i.integrationType === 'nango')!;
    const put = await t.http.put(url(orgA, 'nango')).set(adminAuth).send({ config: { ...CONFIGS.nango, connectionId: 'conn-acme-2' } });
    expect(put.status).toBe(200);
    expect(put.body.fingerprint).not.toBe(before.fingerprint);

    const list = await t.http.get(`/v1/orgs/${orgA}/integrations`).set(bearer(adminA));
    expect(list.status).toBe(200);
    const items = (list.body as { items: Record<string, unknown>[] }).items;
    expect(items.map((i) => i.integrationType)).toEqual(['amazon', 'jumio', 'nango', 'shopify']);
    for (const i of items) expect(Object.keys(i).sort()).toEqual(['fingerprint', 'integrationType', 'keyId', 'updatedAt']);
    expectNoSecret(list.text, 'GET list');
    expect(list.text).not.toContain(AMAZON_CLIENT_ID);
  });

  it('refuses an invalid config with 400 naming the field, never echoing the value', async () => {
    const short = await t.http.put(url(orgA, 'shopify')).set(bearer(adminA)).send({ config: { ...CONFIGS.shopify, accessToken: SHORT_MARKER } });
    expect(short.status).toBe(400);
    expect(short.headers['content-type']).toContain('application/problem+json');
    expect(short.body.code).toBe('VALIDATION_FAILED');
    expect(short.body.detail).toContain('accessToken');
    expectNoSecret(short.text, '400 response');

    const domain = await t.http.put(url(orgA, 'shopify')).set(bearer(adminA)).send({ config: { ...CONFIGS.shopify, shopDomain: DOMAIN_MARKER } });
    expect(domain.status).toBe(400);
    expect(domain.body.detail).toContain('shopDomain');
    expectNoSecret(domain.text, '400 response');

    const missing = await t.http.put(url(orgA, 'amazon')).set(bearer(adminA)).send({ config: { ...CONFIGS.amazon, refreshToken: undefined } });
    expect(missing.status).toBe(400);
    expect(missing.body.detail).toContain('refreshToken');

    const region = await t.http.put(url(orgA, 'jumio')).set(bearer(adminA)).send({ config: { ...CONFIGS.jumio, region: 'mars-1' } });
    expect(region.status).toBe(400);
    expect(region.body.detail).toContain('region');

    // The stored shopify config is untouched by the refused writes.
    const svc = t.app.get(CredentialsService);
    svc.clearCache();
    expect(await svc.load(orgA, 'shopify')).toEqual(CONFIGS.shopify);
  });

  it('Shopify takes an access token or an app\'s client id and secret (with a refresh token for a public app) — one of the two, never both or half', async () => {
    const org = await createOrg(t);
    const admin = (await createKey(t, org, 'admin')).key;
    const shopDomain = 'acme-app.myshopify.com';
    const app = { shopDomain, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET };
    const ok = await t.http.put(url(org, 'shopify')).set(bearer(admin)).send({ config: app });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expectNoSecret(JSON.stringify(ok.body), 'PUT answer');
    expect(await t.app.get(CredentialsService).load(org, 'shopify')).toEqual(app);
    const publicApp = { ...app, refreshToken: SHOPIFY_REFRESH_TOKEN };
    const okPublic = await t.http.put(url(org, 'shopify')).set(bearer(admin)).send({ config: publicApp });
    expect(okPublic.status, JSON.stringify(okPublic.body)).toBe(200);
    expectNoSecret(JSON.stringify(okPublic.body), 'PUT answer');
    expect(await t.app.get(CredentialsService).load(org, 'shopify')).toEqual(publicApp);
    expect((await t.http.put(url(org, 'shopify')).set(bearer(admin)).send({ config: app })).status).toBe(200);
    const refused = [
      { shopDomain },
      { shopDomain, clientId: SHOPIFY_CLIENT_ID },
      { shopDomain, clientSecret: SHOPIFY_CLIENT_SECRET },
      { ...app, accessToken: SHOPIFY_TOKEN },
      { shopDomain, refreshToken: SHOPIFY_REFRESH_TOKEN },
      { shopDomain, clientId: SHOPIFY_CLIENT_ID, refreshToken: SHOPIFY_REFRESH_TOKEN },
      { shopDomain, accessToken: SHOPIFY_TOKEN, refreshToken: SHOPIFY_REFRESH_TOKEN },
    ];
    // A value no call could send (a blank in a client id or token) is refused here, not at every call as CREDENTIALS_INVALID.
    for (const config of [{ ...app, clientId: 'acme app' }, { shopDomain, accessToken: 'shpat_ with blank' }, { ...app, refreshToken: 'shprt_ with blank' }]) {
      const res = await t.http.put(url(org, 'shopify')).set(bearer(admin)).send({ config });
      expect([res.status, res.body.code], JSON.stringify(config)).toEqual([400, 'VALIDATION_FAILED']);
    }
    for (const config of refused) {
      const res = await t.http.put(url(org, 'shopify')).set(bearer(admin)).send({ config });
      expect([res.status, res.body.code, res.body.detail], JSON.stringify(config)).toEqual([
        400,
        'VALIDATION_FAILED',
        "config: give accessToken, or clientId and clientSecret (with refreshToken for a public app's expiring offline token)",
      ]);
      expectNoSecret(res.text, 'refusal');
    }
    expect(await t.app.get(CredentialsService).load(org, 'shopify')).toEqual(app); // unchanged by the refused writes
  });

  it('refuses unknown fields (in config and beside it), non-object bodies and unknown types', async () => {
    const extra = await t.http.put(url(orgA, 'shopify')).set(bearer(adminA)).send({ config: { ...CONFIGS.shopify, baseUrl: 'https://evil.example' } });
    expect(extra.status).toBe(400);
    // Names the fields it knows, never an unknown key: that may be a secret pasted as a key (credential-errors.spec.ts).
    expect(extra.body.detail).toMatch(/^config: an unknown field is not allowed \(known fields: shopDomain, /);
    expect(extra.text).not.toContain('evil.example');
    expectNoSecret(extra.text, '400 response');

    const beside = await t.http.put(url(orgA, 'shopify')).set(bearer(adminA)).send({ config: CONFIGS.shopify, keyId: 'k9' });
    expect(beside.status).toBe(400);
    expectNoSecret(beside.text, '400 response');

    for (const body of [{}, { config: 'x' }, { config: [CONFIGS.shopify] }, { config: null }]) {
      const res = await t.http.put(url(orgA, 'shopify')).set(bearer(adminA)).send(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }

    const unknown = await t.http.put(url(orgA, 'stripe')).set(bearer(adminA)).send({ config: CONFIGS.shopify });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('NOT_FOUND');
    expectNoSecret(unknown.text, '404 response');
    expect((await t.http.delete(url(orgA, 'stripe')).set(bearer(adminA))).status).toBe(404);
  });

  it('is admin only (ops, agent, expert → 403) and scoped to the org (other org admin → 404)', async () => {
    for (const role of ['ops', 'agent', 'expert']) {
      const key = bearer((await createKey(t, orgA, role)).key);
      for (const res of [
        await t.http.put(url(orgA, 'shopify')).set(key).send({ config: CONFIGS.shopify }),
        await t.http.get(`/v1/orgs/${orgA}/integrations`).set(key),
        await t.http.delete(url(orgA, 'shopify')).set(key),
      ]) {
        expect(res.status, role).toBe(403);
        expect(res.body.code).toBe('FORBIDDEN');
      }
    }
    const other = bearer(adminB);
    const put = await t.http.put(url(orgA, 'shopify')).set(other).send({ config: { ...CONFIGS.shopify, accessToken: ATTACKER_TOKEN } });
    expect(put.status).toBe(404);
    expect((await t.http.get(`/v1/orgs/${orgA}/integrations`).set(other)).status).toBe(404);
    expect((await t.http.delete(url(orgA, 'shopify')).set(other)).status).toBe(404);
    expect((await t.http.get(`/v1/orgs/${randomUUID()}/integrations`).set(adminAuth)).status).toBe(404);
    expect((await t.http.put(url('not-a-uuid', 'shopify')).set(adminAuth).send({ config: CONFIGS.shopify })).status).toBe(404);
    // Org A's credentials survived every refused call.
    const svc = t.app.get(CredentialsService);
    svc.clearCache();
    expect(await svc.load(orgA, 'shopify')).toEqual(CONFIGS.shopify);
  });

  it('keeps no plaintext in the database row', async () => {
    const rows = (await t.ds.query(`SELECT row_to_json(c)::text AS json FROM integration_credentials c WHERE org_id = $1`, [orgA])) as { json: string }[];
    expect(rows).toHaveLength(4);
    for (const r of rows) {
      expectNoSecret(r.json, 'integration_credentials row');
      for (const v of [AMAZON_CLIENT_ID, JUMIO_CLIENT_ID, 'acme-store.myshopify.com', 'conn-acme']) expect(r.json).not.toContain(v);
    }
  });

  it('a row copied to another org or another integration type fails to decrypt', async () => {
    await t.ds.query(
      `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint)
       SELECT $2, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint FROM integration_credentials WHERE org_id = $1 AND integration_type = 'shopify'`,
      [orgA, orgB],
    );
    await t.ds.query(
      `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint)
       SELECT org_id, 'nango', key_id, iv, ciphertext, auth_tag, fingerprint FROM integration_credentials WHERE org_id = $1 AND integration_type = 'shopify'`,
      [orgB],
    );
    const svc = t.app.get(CredentialsService);
    svc.clearCache();
    await expect(svc.load(orgB, 'shopify')).rejects.toBeInstanceOf(DecryptionError);
    await expect(svc.load(orgB, 'nango')).rejects.toBeInstanceOf(DecryptionError);
    const err = await svc.load(orgB, 'shopify').catch((e: unknown) => e as Error);
    expectNoSecret(`${String(err)} ${(err as Error).stack ?? ''}`, 'DecryptionError');
    expect(await svc.load(orgB, 'amazon')).toBeNull();
    expect(await svc.load(orgA, 'shopify')).toEqual(CONFIGS.shopify);
    await t.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [orgB]);
  });

  it('deletes with 204, then 404; load answers null', async () => {
    const del = await t.http.delete(url(orgA, 'jumio')).set(bearer(adminA));
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    const again = await t.http.delete(url(orgA, 'jumio')).set(bearer(adminA));
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('NOT_FOUND');
    const svc = t.app.get(CredentialsService);
    expect(await svc.load(orgA, 'jumio')).toBeNull();
    const list = await t.http.get(`/v1/orgs/${orgA}/integrations`).set(bearer(adminA));
    expect((list.body as { items: { integrationType: string }[] }).items.map((i) => i.integrationType)).toEqual(['amazon', 'nango', 'shopify']);
  });

  it('records credentials.updated / credentials.deleted with a fingerprint and no secret', async () => {
    const events = (await t.ds.query(
      `SELECT type, actor, metadata, metadata::text AS text FROM runtime_ledger_events WHERE org_id = $1 AND type LIKE 'credentials.%' ORDER BY seq`,
      [orgA],
    )) as { type: string; actor: { role: string } | null; metadata: Record<string, unknown>; text: string }[];
    expect(events.map((e) => e.type)).toEqual([
      'credentials.updated',
      'credentials.updated',
      'credentials.updated',
      'credentials.updated',
      'credentials.updated',
      'credentials.deleted',
    ]);
    expect(events.map((e) => e.metadata.integrationType)).toEqual([...TYPES, 'nango', 'jumio']);
    for (const e of events) {
      expect(e.metadata.fingerprint).toMatch(/^hmac-v2:[0-9a-f]{16}$/);
      expect(e.actor?.role).toBe('admin');
      expectNoSecret(e.text, `event ${e.type}`);
    }
    const all = (await t.ds.query(`SELECT string_agg(row_to_json(e)::text, '\n') AS text FROM runtime_ledger_events e`)) as [{ text: string }];
    expectNoSecret(all[0].text, 'runtime_ledger_events');
  });

  it('an upper-case org id names the same org everywhere: created, keyed, filtered and credentials readable by tool calls', async () => {
    const upper = randomUUID().toUpperCase();
    const lower = upper.toLowerCase();
    const created = await t.http.post('/v1/orgs').set(adminAuth).send({ id: upper, name: 'Upper' });
    expect(created.status).toBe(201);
    expect(created.body.id).toBe(lower);
    expect((await t.http.post('/v1/orgs').set(adminAuth).send({ id: lower, name: 'Again' })).status).toBe(409);
    expect((await t.http.get(`/v1/orgs/${upper}`).set(adminAuth)).body.id).toBe(lower);

    const admin = await postApiKey(t.http, adminAuth, { orgId: upper, role: 'admin', name: 'upper admin' });
    expect(admin.status).toBe(201);
    expect(admin.body.orgId).toBe(lower);
    // the org's own key may name its org in either spelling
    expect((await t.http.get(`/v1/orgs/${upper}/integrations`).set(bearer(admin.body.key as string))).status).toBe(200);
    expect((await t.http.get(`/v1/api-keys?orgId=${upper}`).set(adminAuth)).body.items.map((k: { id: string }) => k.id)).toContain(admin.body.id);

    // Credentials are encrypted against the org id; a tool call loads them with the id the database spells (lower case).
    const put = await t.http.put(url(upper, 'shopify')).set(bearer(admin.body.key as string)).send({ config: CONFIGS.shopify });
    expect(put.status).toBe(200);
    const svc = t.app.get(CredentialsService);
    svc.clearCache();
    expect(await svc.load(lower, 'shopify')).toEqual(CONFIGS.shopify);
    expect((await t.http.delete(url(upper, 'shopify')).set(adminAuth)).status).toBe(204);
    svc.clearCache();
    expect(await svc.load(lower, 'shopify')).toBeNull();
  });

  it('a percent-encoded org id (upper-case once decoded) is the same org too: its own key may use it, credentials stay readable', async () => {
    const org = randomUUID();
    expect((await t.http.post('/v1/orgs').set(adminAuth).send({ id: org, name: 'Encoded' })).status).toBe(201);
    // Every character escaped: the router decodes it to the upper-case spelling.
    const encoded = [...org.toUpperCase()].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');
    const admin = await postApiKey(t.http, adminAuth, { orgId: org, role: 'admin', name: 'encoded admin' });
    expect((await t.http.get(`/v1/orgs/${encoded}`).set(bearer(admin.body.key as string))).body.id).toBe(org);
    expect((await t.http.get(`/v1/orgs/${encoded}/integrations`).set(bearer(admin.body.key as string))).status).toBe(200);

    expect((await t.http.put(url(encoded, 'shopify')).set(adminAuth).send({ config: CONFIGS.shopify })).status).toBe(200);
    const svc = t.app.get(CredentialsService);
    svc.clearCache();
    expect(await svc.load(org, 'shopify')).toEqual(CONFIGS.shopify);
    // A malformed escape is the router's to refuse (never a 500).
    expect((await t.http.get(`/v1/orgs/%E0%A4%A/integrations`).set(adminAuth)).status).toBeLessThan(500);
  });

  it('fingerprints are bound to the org and integration: an equal config in another org (a guess PUT there) shows another one', async () => {
    const victim = await createOrg(t, 'Fingerprint victim');
    const scratch = await createOrg(t, 'Fingerprint scratch');
    const config = { ...CONFIGS.jumio, clientSecret: GUESSABLE_SECRET };
    const put = await t.http.put(url(victim, 'jumio')).set(adminAuth).send({ config });
    expect(put.status).toBe(200);
    const fp = put.body.fingerprint as string;
    // Stable for the org: the same config again, the listing and the event all show the same one.
    expect((await t.http.put(url(victim, 'jumio')).set(adminAuth).send({ config })).body.fingerprint).toBe(fp);
    const list = await t.http.get(`/v1/orgs/${victim}/integrations`).set(adminAuth);
    expect((list.body as { items: { fingerprint: string }[] }).items.map((i) => i.fingerprint)).toEqual([fp]);
    const [event] = (await t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE org_id = $1 AND type = 'credentials.updated' ORDER BY seq LIMIT 1`, [victim])) as {
      metadata: { fingerprint: string };
    }[];
    expect(event.metadata.fingerprint).toBe(fp);
    // The right guess, PUT into an org the guesser controls, does not reproduce the victim's fingerprint.
    const guess = await t.http.put(url(scratch, 'jumio')).set(adminAuth).send({ config });
    expect(guess.status).toBe(200);
    expect(guess.body.fingerprint).toMatch(/^hmac-v2:[0-9a-f]{16}$/);
    expect(guess.body.fingerprint).not.toBe(fp);
  });

  it('refuses what every call would refuse: a Nango secretKey that is no header value, a blank Amazon / Jumio id, secret or token', async () => {
    const org = await createOrg(t, 'Config checks');
    const ep = emulatorEndpoints('http://127.0.0.1:9'); // nothing listens: a call that passes the handler's checks fails as "network"
    const nangoCall = async (config: Record<string, unknown>) =>
      new NangoHandler(ep).execute(callContext({ toolName: 'nango_proxy', action: 'get', params: { path: '/crm/v3/objects/contacts' }, credentials: config }));
    const cases: { type: IntegrationType; field: string; value: string; ok: boolean }[] = [
      // A trailing newline or blank pasted with the key, a leading blank, a tab, non-ASCII: never a header value.
      ...['\n', ' ', '\r\n', '\u00a0'].map((tail) => ({ type: 'nango' as const, field: 'secretKey', value: `nango-secret-${SHORT_MARKER}${tail}`, ok: false })),
      { type: 'nango', field: 'secretKey', value: ` nango-secret-${SHORT_MARKER}`, ok: false },
      { type: 'nango', field: 'secretKey', value: `nango\tsecret-${SHORT_MARKER}`, ok: false },
      { type: 'nango', field: 'secretKey', value: `nängo-secret-${SHORT_MARKER}`, ok: false },
      // Blanks inside are a header value the handler sends.
      { type: 'nango', field: 'secretKey', value: `nango secret ${SHORT_MARKER}`, ok: true },
      ...(['clientId', 'clientSecret', 'refreshToken'] as const).flatMap((field) => [
        { type: 'amazon' as const, field, value: '   ', ok: false },
        { type: 'amazon' as const, field, value: '\t\n\u00a0\u2028', ok: false },
        { type: 'amazon' as const, field, value: ` ${SHORT_MARKER} `, ok: true },
      ]),
      ...(['clientId', 'clientSecret'] as const).flatMap((field) => [
        { type: 'jumio' as const, field, value: ' ', ok: false },
        { type: 'jumio' as const, field, value: '\ufeff\r\n', ok: false },
        { type: 'jumio' as const, field, value: `${SHORT_MARKER} x`, ok: true },
      ]),
    ];
    for (const c of cases) {
      const config = { ...CONFIGS[c.type], [c.field]: c.value };
      const what = `${c.type}.${c.field} = ${JSON.stringify(c.value)}`;
      // What the handler makes of the config: the PUT must agree with it.
      const handlerOk =
        c.type === 'amazon' ? !('invalidField' in parseAmazonCredentials(config))
        : c.type === 'jumio' ? !('invalidField' in parseJumioCredentials(config))
        : failure(await nangoCall(config)).kind !== 'auth';
      expect(handlerOk, what).toBe(c.ok);
      const res = await t.http.put(url(org, c.type)).set(adminAuth).send({ config });
      if (c.ok) {
        expect(res.status, what).toBe(200);
        continue;
      }
      expect([res.status, res.body.code], what).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.detail, what).toContain(`config.${c.field}`);
      expect(res.text, what).not.toContain(SHORT_MARKER);
    }
  });

  it('never writes a secret or a refused value to the logs', () => {
    expect(t.logs.length).toBeGreaterThan(10);
    expectNoSecret(t.logs.join('\n'), 'logs');
  });
});
