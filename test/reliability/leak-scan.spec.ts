import { readFileSync } from 'node:fs';
import type pg from 'pg';
import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { createFullEmulator, type RecordedRequest, type ShopifyEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, type GatewayProcess } from '../support/gateway-process.js';
import { CREDENTIALS, emulatorEnv, setupOrg, toolUse, type OrgSetup } from '../support/scenario.js';
import {
  AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, JUMIO_CLIENT_SECRET, NANGO_SECRET_KEY, SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN,
  SHOPIFY_TOKEN, TEST_ADMIN_KEY, TEST_MASTER_KEY,
} from '../support/secrets.js';
import { RUN_LOG_ENV } from '../support/run-log.js';
import { adminAuth, bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';
import { leakedIn, openDb, rows, secretNeedles } from './support.js';

/** Wrong credentials used on purpose: as secret as the right ones (and shaped like them). */
const BAD_SHOPIFY_TOKEN = 'shpat_0bad7c0de1eac5ca4e5c0d3000000001';
const BAD_AMAZON_REFRESH = 'Atzr|wrong-refresh-token-for-leak-scan';
const BAD_JUMIO_SECRET = 'WrongJumioSecret4LeakScan9xQ2mZ7';
const BAD_NANGO_KEY = '2c5e4d3b-9e8f-4a7b-8c1d-3e4f5a6b7c8d';
// This file's scan looks for them; the run-wide scan too (they are stored in the shared database).
for (const [name, value] of Object.entries({ BAD_SHOPIFY_TOKEN, BAD_AMAZON_REFRESH, BAD_JUMIO_SECRET, BAD_NANGO_KEY })) recordMintedSecret(`leak-scan.spec ${name}`, value);
/** Secrets in free text, where no key names them: redaction must know them by their vendor's format. */
const FORMAT_SHAPED = [SHOPIFY_TOKEN, SHOPIFY_REFRESH_TOKEN, SHOPIFY_CLIENT_SECRET, AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN];
const freeText = (secrets: string[]): string => `Customer pasted these into the chat, please ignore: ${secrets.join(', ')}; call back after 5pm`;
/** What a careless vendor might echo back in an error body. */
const ECHO = `upstream failure; request had token=${SHOPIFY_TOKEN} secret=${AMAZON_CLIENT_SECRET} refresh=${AMAZON_REFRESH_TOKEN} jumio=${JUMIO_CLIENT_SECRET} nango=${NANGO_SECRET_KEY} master=${TEST_MASTER_KEY}`;

/**
 * Across a flow that touches every vendor, successes and failures alike, the
 * test secrets appear nowhere outside the encrypted columns: not in logs
 * (in-process and a production child process), ledger rows, events, response
 * bodies, or metrics. (The same scan over every file's logs, children and
 * the whole database at the end of the run: test/support/global-setup.ts.)
 */
describe('leak scan: secrets never leave the encrypted columns', () => {
  let emu: VendorEmulator;
  let t: TestApp;
  let gw: GatewayProcess;
  let db: pg.Pool;
  const responses: Response[] = [];
  const apiKeys: string[] = [];
  /** access_token / refresh_token values the emulator answered with (emu.requests records requests only). */
  const answeredTokens: string[] = [];
  /** Calls whose result holds secrets the agent itself sent: the agent may read them back. */
  const agentsOwnText = new Set<string>();
  const record = async (p: PromiseLike<Response>): Promise<Response> => {
    const res = await p;
    responses.push(res);
    return res;
  };

  beforeAll(async () => {
    emu = createFullEmulator();
    for (const vendor of ['shopify', 'amazon', 'jumio'] as const) {
      const v = emu.vendor(vendor);
      const handle = v.handle.bind(v);
      v.handle = async (req) => {
        const res = await handle(req);
        answeredTokens.push(...tokenFields(res.body));
        return res;
      };
    }
    await emu.start();
    db = openDb();
    const env = { ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500', VENDOR_MAX_RETRIES: '1', CIRCUIT_BREAKER_THRESHOLD: '1000' };
    t = await startTestApp(env);
    gw = await startGatewayProcess(env);
  }, 90_000);
  afterAll(async () => {
    await gw?.stop();
    await t?.close();
    await db?.end();
    await emu?.stop();
  });

  /** The representative flow, against one gateway (in-process or child). */
  async function flow(http: TestAgent, org: OrgSetup): Promise<void> {
    const expert = await createKey({ http } as TestApp, org.orgId, 'expert');
    const ops = await createKey({ http } as TestApp, org.orgId, 'ops');
    apiKeys.push(org.agentKey, org.adminKey, expert.key, ops.key);
    const call = (name: string, input: Record<string, unknown>) => record(http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse(name, input)));
    const orgAdmin = bearer(org.adminKey);

    // Every vendor, succeeding.
    const ok = [
      await call('order_lookup', { action: 'lookup', orderId: '12345' }),
      await call('shopify_query', { action: 'get_product', productId: '632910392' }),
      await call('shopify_order', { action: 'add_note', orderId: '1001', note: 'leak scan note' }),
      await call('amazon_query', { action: 'get_order', orderId: '112-0000001-1234567' }),
      await call('amazon_query', { action: 'get_order_items', orderId: '112-0000001-1234567' }),
      await call('kyc', { action: 'get_status', workflowExecutionId: 'a1b2c3d4-0000-4c5d-8e9f-000000000003' }),
      await call('nango_proxy', { action: 'get', path: 'v1/orders', query: { limit: '1' } }),
    ];
    for (const r of ok) expect(r.body, JSON.stringify(r.body).slice(0, 300)).toMatchObject({ status: 'succeeded' });
    // A high-risk write through an expert approval.
    const post = await call('nango_proxy', { action: 'post', path: 'v1/orders', body: { note: 'approved write' } });
    expect(post.status).toBe(202);
    const list = await record(http.get('/v1/approvals?status=pending').set(bearer(expert.key)));
    const ap = (list.body.items as { id: string; toolCallId: string; actionDigest: string }[]).find((a) => a.toolCallId === post.body.toolCallId)!;
    await record(http.post(`/v1/approvals/${ap.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: ap.actionDigest, reason: 'fine' }));
    const settled = await record(http.get(`/v1/tool-calls/${post.body.toolCallId as string}/result?waitMs=10000`).set(bearer(org.agentKey)));
    expect(settled.body.status).toBe('succeeded');

    // Vendors failing with our secrets echoed in their error bodies.
    for (const [vendor, path, name, input] of [
      ['shopify', /graphql/, 'order_lookup', { action: 'lookup', orderId: '1001' }],
      ['amazon', /\/orders\//, 'amazon_query', { action: 'get_order', orderId: '112-0000001-1234567' }],
      ['jumio', /workflow-executions/, 'kyc', { action: 'get_status', workflowExecutionId: 'a1b2c3d4-0000-4c5d-8e9f-000000000003' }],
      ['nango', /\/proxy\//, 'nango_proxy', { action: 'get', path: 'v1/orders' }],
    ] as const) {
      for (const status of [500, 400, 401]) {
        emu.fault({ vendor, path, kind: 'status', status, body: { error: ECHO, message: ECHO, errors: [{ message: ECHO }] }, times: Infinity });
        const res = await call(name, input);
        emu.clearFaults();
        expect(res.body.status, `${vendor} ${status}`).toBe('failed');
      }
    }
    // Secrets offered as params (by name and by vendor format) are redacted in the ledger.
    await call('order_lookup', { action: 'lookup', orderId: '12345', apiKey: NANGO_SECRET_KEY, token: SHOPIFY_TOKEN });
    // … and in free text, known by their format alone: the ledger keeps the note redacted (each secret and nothing
    // else) as sent and in the vendor's answer. The vendor gets the note as written, and the agent the vendor's
    // answer as is: its own text, so those two answers are left out of `responses`.
    const noted = await http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: freeText(FORMAT_SHAPED) }));
    expect(noted.body.status, JSON.stringify(noted.body).slice(0, 300)).toBe('succeeded');
    agentsOwnText.add(noted.body.toolCallId as string);
    expect(emu.vendor<ShopifyEmulator>('shopify').order(1001)?.note).toBe(freeText(FORMAT_SHAPED));
    const redactedNote = freeText(FORMAT_SHAPED.map(() => '[REDACTED]'));
    const [stored] = await rows<{ input: { note: string }; output: { note: string } }>(
      db, 'SELECT input_redacted AS input, output_redacted AS output FROM tool_calls WHERE id = $1', [noted.body.toolCallId],
    );
    expect(stored).toEqual({ input: { orderId: '1001', note: redactedNote }, output: { orderId: '1001', note: redactedNote } });

    // Shopify's own rotating tokens: a public app's refresh grant (the refresh token is replaced on every use) and
    // a Dev Dashboard app's client-credentials grant. needles() looks for every token they handed out.
    const shopDomain = CREDENTIALS.shopify.shopDomain;
    for (const config of [
      { shopDomain, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken: SHOPIFY_REFRESH_TOKEN },
      { shopDomain, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET },
    ]) {
      expect((await record(http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(orgAdmin).send({ config }))).status).toBe(200);
      const res = await call('order_lookup', { action: 'lookup', orderId: '12345' });
      expect(res.body.status, JSON.stringify(res.body).slice(0, 300)).toBe('succeeded');
    }

    // Wrong credentials at every vendor.
    const bad = {
      shopify: { ...CREDENTIALS.shopify, accessToken: BAD_SHOPIFY_TOKEN },
      amazon: { ...CREDENTIALS.amazon, refreshToken: BAD_AMAZON_REFRESH },
      jumio: { ...CREDENTIALS.jumio, clientSecret: BAD_JUMIO_SECRET },
      nango: { ...CREDENTIALS.nango, secretKey: BAD_NANGO_KEY },
    };
    for (const [vendor, config] of Object.entries(bad)) {
      expect((await record(http.put(`/v1/orgs/${org.orgId}/integrations/${vendor}/credentials`).set(orgAdmin).send({ config }))).status).toBe(200);
    }
    const denied = [
      await call('order_lookup', { action: 'lookup', orderId: '12345' }),
      await call('amazon_query', { action: 'get_order', orderId: '112-0000001-1234567' }),
      await call('kyc', { action: 'get_status', workflowExecutionId: 'a1b2c3d4-0000-4c5d-8e9f-000000000003' }),
      await call('nango_proxy', { action: 'get', path: 'v1/orders' }),
    ];
    for (const r of denied) expect(r.body.status).toBe('failed');
    // Invalid credential configs: the validation error must not echo the secret values.
    await record(http.put(`/v1/orgs/${org.orgId}/integrations/amazon/credentials`).set(orgAdmin).send({ config: { ...CREDENTIALS.amazon, region: 'mars', extra: AMAZON_CLIENT_SECRET } }));
    await record(http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(orgAdmin).send({ config: { accessToken: SHOPIFY_TOKEN, shopDomain: `not a domain ${SHOPIFY_TOKEN}` } }));
    await record(http.put(`/v1/orgs/${org.orgId}/integrations/nango/credentials`).set(orgAdmin).send({ config: { ...CREDENTIALS.nango, secretKey: 12 } }));
    // Secrets used as API keys, and in places keys go.
    await record(http.get('/v1/tool-calls').set(bearer(SHOPIFY_TOKEN)));
    await record(http.get('/v1/tool-calls').set('Authorization', `Basic ${NANGO_SECRET_KEY}`));
    await record(http.get('/v1/tool-calls').set(bearer(`${TEST_ADMIN_KEY}x`)));
    // Put the right credentials back (the rotation path re-encrypts them).
    for (const vendor of ['shopify', 'amazon', 'jumio', 'nango'] as const) {
      await record(http.put(`/v1/orgs/${org.orgId}/integrations/${vendor}/credentials`).set(orgAdmin).send({ config: CREDENTIALS[vendor] }));
    }

    // Everything ops and admins can read back.
    await record(http.get(`/v1/orgs/${org.orgId}/integrations`).set(orgAdmin));
    const calls = await record(http.get(`/v1/tool-calls?runId=${org.runId}&limit=200`).set(bearer(ops.key)));
    for (const c of calls.body.items as { id: string }[]) {
      await record(http.get(`/v1/tool-calls/${c.id}`).set(bearer(ops.key)));
      if (!agentsOwnText.has(c.id)) await record(http.get(`/v1/tool-calls/${c.id}/result`).set(bearer(org.agentKey)));
    }
    await record(http.get(`/v1/ledger/events?runId=${org.runId}&limit=200`).set(bearer(ops.key)));
    await record(http.get(`/v1/tool-calls/export?format=ndjson&runId=${org.runId}`).set(bearer(ops.key)));
    await record(http.get(`/v1/tool-calls/export?format=csv&runId=${org.runId}`).set(bearer(ops.key)));
    await record(http.get(`/v1/orgs/${org.orgId}/usage`).set(bearer(ops.key)));
    await record(http.get(`/v1/ledger/verify?orgId=${org.orgId}`).set(bearer(ops.key)));
    await record(http.get('/v1/api-keys').set(adminAuth));
    await record(http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey)));
    await record(http.get('/metrics'));
  }

  const ALL_VENDORS = ['shopify', 'amazon', 'jumio', 'nango'] as const;
  const TOOLS = ['order_lookup.lookup', 'shopify_query.get_product', 'shopify_order.add_note', 'amazon_query.get_order', 'amazon_query.get_order_items', 'kyc.get_status', 'nango_proxy.get', 'nango_proxy.post'];

  it('runs the flow on the in-process app and on a production child process', async () => {
    await flow(t.http, await setupOrg(t, { tools: TOOLS, vendors: [...ALL_VENDORS] }));
    await flow(gw.http, await setupOrgVia(gw, { tools: TOOLS, vendors: [...ALL_VENDORS] }));
    expect(responses.length).toBeGreaterThan(100);
  }, 120_000);

  /** Every secret the flow handled, including the vendors' own tokens seen at the emulator. */
  const needles = (): string[] => {
    // Access tokens in use (Amazon, Jumio, Shopify's granted and refreshed ones), the Basic credentials of Jumio's
    // token exchange, the secrets sent to the token endpoints (Shopify's rotated refresh tokens) and what they answered.
    const issued = emu.requests
      .flatMap((r) => [
        r.headers['x-amz-access-token'],
        r.headers['x-shopify-access-token'],
        /^(?:Bearer|Basic) (.+)$/.exec(r.headers.authorization ?? '')?.[1],
        ...tokenFields(tokenRequestBody(r)),
      ])
      .filter((v): v is string => !!v);
    return [...new Set(secretNeedles([...apiKeys, BAD_SHOPIFY_TOKEN, BAD_AMAZON_REFRESH, BAD_JUMIO_SECRET, BAD_NANGO_KEY, ...issued, ...answeredTokens]))];
  };

  it('knows what it is looking for', () => {
    const n = needles();
    expect(n).toEqual(expect.arrayContaining([SHOPIFY_TOKEN, AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, JUMIO_CLIENT_SECRET, NANGO_SECRET_KEY, TEST_MASTER_KEY, TEST_ADMIN_KEY]));
    expect(n.length).toBeGreaterThan(15); // API keys and issued vendor tokens included
    // Shopify's rotated tokens: each flow's refresh grant handed out a new refresh and access token (issuedSecrets),
    // and its client-credentials grant an access token.
    const shop = emu.vendor<ShopifyEmulator>('shopify');
    expect(shop.issuedSecrets.filter((s) => s.startsWith('shprt_'))).toHaveLength(2);
    expect(n).toEqual(expect.arrayContaining(shop.issuedSecrets));
    expect(n.filter((s) => s.startsWith('shpat_') && s !== SHOPIFY_TOKEN && s !== BAD_SHOPIFY_TOKEN).length).toBeGreaterThanOrEqual(4);
    // The emulator did receive the secrets: the scan below is not vacuous.
    const sent = emu.requests.map((r) => JSON.stringify(r.headers) + decodeURIComponent(r.body)).join('\n');
    for (const s of [SHOPIFY_TOKEN, SHOPIFY_REFRESH_TOKEN, SHOPIFY_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, AMAZON_CLIENT_SECRET, NANGO_SECRET_KEY, BAD_SHOPIFY_TOKEN, BAD_AMAZON_REFRESH]) {
      expect(sent.includes(s), s).toBe(true);
    }
  });

  it('no secret in any response body or header', () => {
    const text = responses.map((r) => `${r.status} ${JSON.stringify(r.headers)} ${r.text}`).join('\n');
    expect(leakedIn(text, needles())).toEqual([]);
    // and the vendors' echoed error text never reached a tool_result
    expect(text).not.toContain('upstream failure; request had');
  });

  it('no secret in the logs: in-process and the child process stdout/stderr', () => {
    expect(t.logs.length).toBeGreaterThan(50);
    expect(leakedIn(t.logs.join('\n'), needles())).toEqual([]);
    const out = gw.output();
    expect(out.length).toBeGreaterThan(1000);
    expect(leakedIn(out, needles())).toEqual([]);
    expect(`${t.logs.join('\n')}\n${out}`).not.toContain('upstream failure; request had');
  });

  it('the run log gets this file\'s in-process log lines and the child\'s output (global-setup.ts scans it and every table after the last file)', () => {
    const path = process.env[RUN_LOG_ENV];
    expect(path, 'global-setup.ts sets the run log path').toBeTruthy();
    const mine = readFileSync(path!, 'utf8').split('\n').filter((l) => l.startsWith('test/reliability/leak-scan.spec.ts | '));
    const inProcess = mine.filter((l) => l.includes(' | in-process log\t'));
    const child = mine.filter((l) => l.includes(` | child gateway (dist/src/main.js) pid ${gw.pid} stdout\t`));
    expect(inProcess.length).toBeGreaterThanOrEqual(t.logs.length);
    expect(child.join('\n').length).toBeGreaterThan(1000);
    expect(child.some((l) => l.includes('listening on http://'))).toBe(true);
  });

  it('no secret in /metrics', async () => {
    const metrics = [(await t.http.get('/metrics')).text, (await gw.http.get('/metrics')).text].join('\n');
    expect(metrics).toContain('# TYPE');
    expect(leakedIn(metrics, needles())).toEqual([]);
  });

  it('no secret in any row of any table (bytea included, as hex), and the encrypted columns hold no plaintext', async () => {
    const tables = await rows<{ table_name: string }>(db, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
    expect(tables.map((x) => x.table_name)).toEqual(expect.arrayContaining(['tool_calls', 'runtime_ledger_events', 'policy_decisions', 'approval_requests', 'integration_credentials', 'tool_call_results']));
    const n = needles();
    const hexNeedles = n.map((s) => Buffer.from(s).toString('hex'));
    let scanned = 0;
    for (const { table_name } of tables) {
      const all = await rows<{ j: string }>(db, `SELECT row_to_json(x)::text AS j FROM "${table_name}" x`);
      scanned += all.length;
      const text = all.map((r) => r.j).join('\n');
      expect(leakedIn(text, n), table_name).toEqual([]);
      expect(hexNeedles.filter((h) => text.includes(h)), `${table_name} (hex)`).toEqual([]);
    }
    expect(scanned).toBeGreaterThan(200);
    // The ciphertexts themselves: decoded bytes, not just their hex text.
    for (const [table, column] of [['integration_credentials', 'ciphertext'], ['tool_call_results', 'ciphertext'], ['tool_call_inputs', 'ciphertext'], ['vendor_tokens', 'ciphertext']] as const) {
      const cols = await rows<{ column_name: string }>(db, `SELECT column_name FROM information_schema.columns WHERE table_name = $1 AND data_type = 'bytea'`, [table]);
      expect(cols.map((c) => c.column_name), table).toContain(column);
      for (const { column_name } of cols) {
        const blobs = await rows<{ b: Buffer }>(db, `SELECT "${column_name}" AS b FROM "${table}" WHERE "${column_name}" IS NOT NULL`);
        for (const { b } of blobs) expect(n.filter((s) => b.includes(Buffer.from(s))), `${table}.${column_name}`).toEqual([]);
      }
    }
  });
});

/** The secrets named in a token request or answer: OAuth's access_token, refresh_token and client_secret. */
function tokenFields(body: unknown): string[] {
  if (typeof body !== 'object' || body === null) return [];
  const fields = body as Record<string, unknown>;
  return ['access_token', 'refresh_token', 'client_secret'].map((k) => fields[k]).filter((v): v is string => typeof v === 'string');
}

/** The body of a request to a token endpoint (Shopify's JSON, Login with Amazon's form), parsed. */
function tokenRequestBody(r: RecordedRequest): Record<string, string> | undefined {
  if (!/\/(?:auth\/o2\/token|oauth2\/token|admin\/oauth\/access_token)$/.test(r.path)) return undefined;
  try {
    return JSON.parse(r.body) as Record<string, string>;
  } catch {
    return Object.fromEntries(new URLSearchParams(r.body));
  }
}
