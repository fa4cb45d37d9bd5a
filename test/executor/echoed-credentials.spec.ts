import 'reflect-metadata';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { REDACTED } from '../../src/redaction/markers.js';
import type { ToolActionSpec, VendorCallContext, VendorHandler, VendorOutcome } from '../../src/vendors/vendor-handler.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { AMAZON_FIXTURE_ORDERS, AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { JUMIO_CLIENT_SECRET, NANGO_SECRET_KEY } from '../support/secrets.js';
import { bearer, createKey } from '../support/test-app.js';
import { fixedCredentials } from './fixed-credentials.js';
import { call, rowOf } from './support.js';

/**
 * A vendor that echoes the credential the gateway authenticated with (Nango answering 200 with the org's secret key,
 * a UUID no shape redaction knows) must not have it written to the ledger's copy, shown to ops, sealed into the stored
 * result or handed to the agent: the executor redacts the org's credential values, by value, from what it returns.
 */
describe('a vendor answer echoing the org\'s own credential, through the pipeline', () => {
  let h: Harness;
  let org: OrgSetup;
  let ops: string;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  it('nango: the secret key, as written and percent-encoded, in values and a key, reaches neither the agent, the stored result nor the ledger', async () => {
    const body = {
      id: 42,
      debug: `request authorised with key ${NANGO_SECRET_KEY}`,
      key: NANGO_SECRET_KEY,
      echoed: { url: `https://api.nango.dev/proxy?key=${encodeURIComponent(NANGO_SECRET_KEY)}`, [NANGO_SECRET_KEY]: 'as a name' },
    };
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, body });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/whoami' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', result: { id: 42, key: REDACTED, debug: `request authorised with key ${REDACTED}` } });
    const id = res.body.toolCallId as string;
    expect(JSON.stringify(res.body)).not.toContain(NANGO_SECRET_KEY);

    const row = await rowOf(h, id);
    expect(JSON.stringify(row.output_redacted)).not.toContain(NANGO_SECRET_KEY);
    expect(row.output_redacted).toMatchObject({ id: 42 });
    const view = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(ops));
    expect(view.status).toBe(200);
    expect(JSON.stringify(view.body)).not.toContain(NANGO_SECRET_KEY);
    const full = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect(full.status).toBe(200);
    expect(full.body.result).toMatchObject({ id: 42, key: REDACTED });
    expect(JSON.stringify(full.body)).not.toContain(NANGO_SECRET_KEY);
    expect(JSON.stringify(full.body)).not.toContain(encodeURIComponent(NANGO_SECRET_KEY));
  });

  it('amazon: the access token bought with the org\'s credentials (not in them) and echoed by SP-API reaches neither the agent, the stored result nor the ledger', async () => {
    const amazon = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    const amazonOps = (await createKey(h.t, amazon.orgId, 'ops')).key;
    const from = h.emu.requests.length;
    const first = await call(h, amazon, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped });
    expect(first.body.status).toBe('succeeded');
    const token = h.emu.requests.slice(from).find((r) => r.headers['x-amz-access-token'])?.headers['x-amz-access-token'];
    expect(token, 'the call sent an LWA access token').toMatch(/^Atza\|/);
    // The next order read answered with the token (cached, sent again) in a field the gateway keeps, as sent and
    // percent-encoded: a debugging proxy, a compromised endpoint.
    const order = AMAZON_FIXTURE_ORDERS[AMAZON_ORDER_IDS.shipped]!;
    const echoed = { ...order, ShippingAddress: { ...(order.ShippingAddress as object), City: `Seattle ${token!}`, StateOrRegion: encodeURIComponent(token!) } };
    h.emu.fault({ vendor: 'amazon', method: 'GET', path: new RegExp(`/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}$`), kind: 'status', status: 200, body: { payload: echoed } });
    const res = await call(h, amazon, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped });
    expect(res.body).toMatchObject({ status: 'succeeded', result: { orderId: AMAZON_ORDER_IDS.shipped, shippingAddress: { City: `Seattle ${REDACTED}`, StateOrRegion: REDACTED } } });
    const id = res.body.toolCallId as string;
    const view = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(amazonOps));
    expect(view.status).toBe(200);
    const full = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(amazon.agentKey));
    expect(full.status).toBe(200);
    const row = JSON.stringify(await rowOf(h, id));
    for (const form of [token!, encodeURIComponent(token!)]) {
      expect(JSON.stringify(res.body), 'the agent\'s answer').not.toContain(form);
      expect(JSON.stringify(full.body), 'the stored result').not.toContain(form);
      expect(row, 'the ledger row').not.toContain(form);
      expect(JSON.stringify(view.body), 'the ops view').not.toContain(form);
    }
  });
});

const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;

function entry(handle: (ctx: VendorCallContext) => Promise<VendorOutcome>): CatalogEntry {
  const spec: ToolActionSpec = { name: 'get_status', description: '', inputSchema: {}, riskLevel: 'low', sideEffect: 'read', idempotent: true, costCents: 0 };
  const handler: VendorHandler = { vendor: 'jumio', tools: [], execute: handle };
  return { tool: { name: 'kyc', vendor: 'jumio', description: '', actions: [spec] }, action: spec, vendor: 'jumio', handler, key: 'kyc.get_status' };
}

describe('the executor redacts the call\'s credential values from what it returns', () => {
  const config = { VENDOR_TIMEOUT_MS: 1_000, VENDOR_MAX_RETRIES: 0, VENDOR_RETRY_AFTER_CAP_MS: 2_000, CIRCUIT_BREAKER_THRESHOLD: 5, CIRCUIT_BREAKER_COOLDOWN_MS: 1_000 } as AppConfig;
  const jumio = { clientId: 'jumio-emulator-client', clientSecret: JUMIO_CLIENT_SECRET, region: 'amer-1', accountId: '0f0e0d0c-0b0a-4908-8706-050403020100' };
  const ex = new RuntimeToolExecutor(config, fixedCredentials(jumio), new Clock(), metrics);
  const req = (e: CatalogEntry) => ({ entry: e, orgId: 'org-echo', toolCallId: 't1', idempotencyKey: 'k1', params: {} });

  it('a result: the client secret goes, the account id and region (no secrets, named by answers) stay', async () => {
    const e = entry(async () => ({ ok: true, vendorStatus: 200, data: { account: { id: jumio.accountId }, region: 'amer-1', note: `secret=${JUMIO_CLIENT_SECRET}` } }));
    const out = await ex.execute(req(e));
    expect(out).toMatchObject({ status: 'succeeded', result: { account: { id: jumio.accountId }, region: 'amer-1', note: `secret=${REDACTED}` } });
  });

  it('the error text of a failure made from the vendor\'s answer', async () => {
    const e = entry(async () => ({ ok: false, kind: 'rejected', vendorStatus: 400, requestSent: true, message: `jumio refused the request (client secret ${JUMIO_CLIENT_SECRET} is not valid here)` }));
    const out = await ex.execute(req(e));
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(out.status !== 'succeeded' && out.errorText).toBe(`jumio refused the request (client secret ${REDACTED} is not valid here)`);
  });
});
