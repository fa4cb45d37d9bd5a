import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import type { AmazonEmulator } from '../../src/emulator/index.js';
import { ConfigError } from '../../src/config/config.schema.js';
import { emulatorEnv, setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, startTestApp } from '../support/test-app.js';
import { call, eventsOf, rowOf } from './support.js';

/**
 * AMAZON_ORDERS_API=2026-01-01 through the whole pipeline, over real HTTP to
 * the emulator, next to a gateway left on Orders v0: the same tool calls must
 * answer the same, and the v2026 gateway must never touch a v0 path.
 */
const TOOLS = ['amazon_query.get_order', 'amazon_query.get_order_items'];
const V2026 = /^\/orders\/2026-01-01\/orders\/[^/]+$/;
const V0 = /^\/orders\/v0\//;

describe('amazon_query on SP-API Orders v2026-01-01', () => {
  let v0: Harness;
  let v2026: Harness;
  let org0: OrgSetup;
  let org: OrgSetup;
  let amazon: AmazonEmulator;

  beforeAll(async () => {
    // A budget that fits SP-API's 2 s back-off after a 429 (as in read-faults.spec.ts).
    v0 = await startHarness({ VENDOR_TIMEOUT_MS: '6000' });
    v2026 = await startHarness({ VENDOR_TIMEOUT_MS: '6000', AMAZON_ORDERS_API: '2026-01-01' });
    org0 = await setupOrg(v0.t, { tools: TOOLS, vendors: ['amazon'] });
    org = await setupOrg(v2026.t, { tools: TOOLS, vendors: ['amazon'] });
    amazon = v2026.emu.vendor<AmazonEmulator>('amazon');
  });
  afterAll(async () => {
    await v2026?.close();
    await v0?.close();
  });

  const amazonCall = (h: Harness, o: OrgSetup, action: string, orderId: string) => call(h, o, 'amazon_query', { action, orderId });

  it('the config reached the gateway: v2026 is on, the other gateway still on v0', () => {
    expect(v2026.t.config.AMAZON_ORDERS_API).toBe('2026-01-01');
    expect(v0.t.config.AMAZON_ORDERS_API).toBe('v0');
  });

  it('get_order and get_order_items give the v0 results for the same fixture orders: tool result, model-facing text and ledger output', async () => {
    const cases: [string, string][] = [
      ['get_order', AMAZON_ORDER_IDS.shipped],
      ['get_order_items', AMAZON_ORDER_IDS.shipped],
      ['get_order', AMAZON_ORDER_IDS.paged],
      ['get_order_items', AMAZON_ORDER_IDS.paged],
      ['get_order', AMAZON_ORDER_IDS.pending],
    ];
    for (const [action, id] of cases) {
      const what = `${action} ${id}`;
      const old = await amazonCall(v0, org0, action, id);
      const now = await amazonCall(v2026, org, action, id);
      expect(old.body.status, what).toBe('succeeded');
      expect(now.body.status, what).toBe('succeeded');
      expect(now.body.result, what).toEqual(old.body.result);
      expect(now.body.toolResult.content, what).toBe(old.body.toolResult.content);
      const [oldRow, nowRow] = [await rowOf(v0, old.body.toolCallId), await rowOf(v2026, now.body.toolCallId)];
      expect(nowRow.output_redacted, what).toEqual(oldRow.output_redacted);
      expect(nowRow.retry_count, what).toBe(0);
    }
    // Spot-check the content is the real order, not two equal nulls.
    const shipped = await amazonCall(v2026, org, 'get_order', AMAZON_ORDER_IDS.shipped);
    expect(shipped.body.result).toMatchObject({ status: 'Shipped', fulfillmentChannel: 'MFN', orderTotal: { currency: 'USD', amount: '64.98' }, buyerEmail: expect.stringContaining('@marketplace.amazon.com') });
    expect((await rowOf(v2026, shipped.body.toolCallId)).output_redacted).toMatchObject({ shippingAddress: { PostalCode: '98101-1234' } });
  });

  it('get_order carries no more PII than v0 without an RDT, on either version: no name, street or phone in the result, the model text or the ledger', async () => {
    for (const [h, o] of [[v0, org0], [v2026, org]] as const) {
      const res = await amazonCall(h, o, 'get_order', AMAZON_ORDER_IDS.shipped);
      expect(res.body.status).toBe('succeeded');
      expect(res.body.result).toMatchObject({ shippingAddress: { City: 'Seattle', StateOrRegion: 'WA', PostalCode: '98101-1234', CountryCode: 'US' } });
      expect(Object.keys((res.body.result as { shippingAddress: object }).shippingAddress).sort()).toEqual(['City', 'CountryCode', 'PostalCode', 'StateOrRegion']);
      const row = await rowOf(h, res.body.toolCallId);
      for (const text of [JSON.stringify(res.body.result), res.body.toolResult.content, JSON.stringify(row.output_redacted)]) {
        expect(text).not.toMatch(/Marcus|Webb|Fake Harbor|555-0199/);
      }
    }
  });

  it('the tool catalog is the same on both', async () => {
    const tools = async (h: Harness, o: OrgSetup) => (await h.t.http.get('/v1/tools').set(bearer(o.agentKey))).body as { items: { name: string }[] };
    const [a, b] = [await tools(v0, org0), await tools(v2026, org)];
    expect(b.items.find((t) => t.name === 'amazon_query')).toBeDefined();
    expect(b).toEqual(a);
  });

  it('one GET /orders/2026-01-01/orders/{id} per call, with only the datasets the action returns', async () => {
    const from = v2026.emu.requests.length;
    expect((await amazonCall(v2026, org, 'get_order', AMAZON_ORDER_IDS.shipped)).body.status).toBe('succeeded');
    expect((await amazonCall(v2026, org, 'get_order_items', AMAZON_ORDER_IDS.paged)).body.status).toBe('succeeded');
    const sent = v2026.emu.requests.slice(from).filter((r) => r.vendor === 'amazon' && r.path !== '/auth/o2/token');
    expect(sent.map((r) => `${r.method} ${r.path}?${decodeURIComponent(r.query)}`)).toEqual([
      `GET /orders/2026-01-01/orders/${AMAZON_ORDER_IDS.shipped}?includedData=BUYER,RECIPIENT,PROCEEDS,FULFILLMENT`,
      `GET /orders/2026-01-01/orders/${AMAZON_ORDER_IDS.paged}?includedData=PROCEEDS,FULFILLMENT`,
    ]);
    expect(sent.every((r) => /^Atza\|/.test(r.headers['x-amz-access-token']))).toBe(true);
  });

  it('an unknown order → failed / VENDOR_NOT_FOUND after one request, not retried', async () => {
    for (const action of ['get_order', 'get_order_items']) {
      const before = v2026.emu.count({ path: V2026 });
      const res = await amazonCall(v2026, org, action, AMAZON_ORDER_IDS.unknown);
      expect(res.body, action).toMatchObject({ status: 'failed', errorCode: 'VENDOR_NOT_FOUND', toolResult: { is_error: true } });
      expect(v2026.emu.count({ path: V2026 }) - before, action).toBe(1);
      expect(await rowOf(v2026, res.body.toolCallId), action).toMatchObject({ retry_count: 0, vendor_status: 404 });
    }
  });

  it('429 QuotaExceeded, then success: retried once after at least 1/rate s (0.5/s → 2 s)', async () => {
    const fresh = await setupOrg(v2026.t, { tools: TOOLS, vendors: ['amazon'] }); // its own breaker
    v2026.emu.fault({ vendor: 'amazon', path: V2026, kind: 'status', status: 429 });
    const from = v2026.emu.requests.length;
    const res = await amazonCall(v2026, fresh, 'get_order_items', AMAZON_ORDER_IDS.shipped);
    expect(res.body.status).toBe('succeeded');
    expect((res.body.result as { items: unknown[] }).items).toHaveLength(2);
    expect((await rowOf(v2026, res.body.toolCallId)).retry_count).toBe(1);
    const [refused, retried] = v2026.emu.requests.slice(from).filter((r) => V2026.test(r.path));
    expect(retried.receivedAt - refused.receivedAt).toBeGreaterThanOrEqual(2000);
    const retriedEvent = (await eventsOf(v2026, res.body.toolCallId)).find((e) => e.type === 'tool_call.retried');
    expect(retriedEvent?.metadata).toMatchObject({ reason: 'rate_limited' });
  });

  it('an expired token (403 Unauthorized "expired"): one LWA refresh and one resend inside the call, which succeeds', async () => {
    expect((await amazonCall(v2026, org, 'get_order', AMAZON_ORDER_IDS.shipped)).body.status).toBe('succeeded');
    const tokensBefore = amazon.tokenRequests;
    const from = v2026.emu.requests.length;
    amazon.expireAllTokens();
    const res = await amazonCall(v2026, org, 'get_order', AMAZON_ORDER_IDS.shipped);
    expect(res.body.status).toBe('succeeded');
    expect(res.body.result).toMatchObject({ orderId: AMAZON_ORDER_IDS.shipped, status: 'Shipped' });
    expect(amazon.tokenRequests - tokensBefore).toBe(1);
    const sent = v2026.emu.requests.slice(from).filter((r) => V2026.test(r.path));
    expect(sent).toHaveLength(2);
    expect(sent[1].headers['x-amz-access-token']).not.toBe(sent[0].headers['x-amz-access-token']);
    expect((await rowOf(v2026, res.body.toolCallId)).retry_count).toBe(0);
  });

  it('the v2026 gateway never called an Orders v0 path; the v0 gateway never called a v2026 one', () => {
    expect(v2026.emu.count({ path: V2026 })).toBeGreaterThan(0);
    expect(v2026.emu.count({ path: V0 })).toBe(0);
    expect(v0.emu.count({ path: V0 })).toBeGreaterThan(0);
    expect(v0.emu.count({ path: V2026 })).toBe(0);
  });

  it('an unknown AMAZON_ORDERS_API stops start-up with an error naming the variable and the accepted values', async () => {
    for (const bad of ['v1', '2026-01', 'V0']) {
      const err = await startTestApp({ ...emulatorEnv(v2026.emu.url), AMAZON_ORDERS_API: bad }).then(
        async (t) => {
          await t.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err, bad).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).message, bad).toContain(`AMAZON_ORDERS_API must be one of v0, 2026-01-01, got "${bad}"`);
    }
  });
});
