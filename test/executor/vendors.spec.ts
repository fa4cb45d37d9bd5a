import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import type { AmazonEmulator, NangoEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { JUMIO_EXECUTION_IDS, JUMIO_FIXTURE_PII } from '../../src/emulator/jumio.emulator.js';
import { NANGO_EMULATOR_CREDENTIALS } from '../../src/emulator/nango.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, eventsOf, rowOf, send } from './support.js';
import { SHOPIFY_TOKEN } from '../support/secrets.js';

const ALL_TOOLS = [
  'order_lookup.lookup', 'shopify_query.get_product', 'shopify_order.add_note', 'shopify_refund.create',
  'amazon_query.get_order', 'amazon_query.get_order_items', 'kyc.get_status', 'nango_proxy.get', 'nango_proxy.post',
];
const ALLOW_WRITES = [
  { id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
  { id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
];

describe('every tool of every vendor, through the full pipeline against the emulator', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ALL_TOOLS, vendors: ['shopify', 'amazon', 'jumio', 'nango'], rules: ALLOW_WRITES });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Asserts the common shape of a successful call and returns its ledger row. */
  async function succeeded(res: { status: number; body: Record<string, unknown> }, costCents: number) {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', errorCode: null, replayed: false, truncated: false, toolResult: { is_error: false } });
    expect(JSON.parse((res.body.toolResult as { content: string }).content)).toEqual(res.body.result);
    const id = res.body.toolCallId as string;
    expect((await eventsOf(h, id)).map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.succeeded']);
    const row = await rowOf(h, id);
    expect(row).toMatchObject({ status: 'succeeded', retry_count: 0, cost_cents: costCents, error_code: null });
    return row;
  }

  it('order_lookup.lookup reads the order over GraphQL with the shop token', async () => {
    const before = h.emu.requests.length;
    const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    await succeeded(res, 1);
    expect(res.body.result).toMatchObject({ orderId: '12345', name: '#1042', status: 'fulfilled', financialStatus: 'paid', trackingNumber: 'TRACK-001' });
    const sent = h.emu.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ vendor: 'shopify', method: 'POST', path: '/admin/api/2026-07/graphql.json' });
    expect(sent[0].headers['x-shopify-access-token']).toBe(SHOPIFY_TOKEN);
    expect(JSON.parse(sent[0].body)).toMatchObject({ variables: { id: 'gid://shopify/Order/12345' } });
  });

  it('shopify_query.get_product returns the product and its variants', async () => {
    const res = await call(h, org, 'shopify_query', { action: 'get_product', productId: '632910392' });
    await succeeded(res, 1);
    expect(res.body.result).toMatchObject({ productId: '632910392', title: 'Aurora Trail Running Shoe', status: 'active' });
    expect((res.body.result as { variants: unknown[] }).variants).toEqual([
      expect.objectContaining({ variantId: '808950810', sku: 'AUR-9-BLU', price: '90.00' }),
      expect.objectContaining({ variantId: '808950811', sku: 'AUR-10-BLU' }),
    ]);
  });

  it('shopify_order.add_note (medium risk, observed) overwrites the note at the vendor', async () => {
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'Customer asked for gift wrap' });
    const row = await succeeded(res, 2);
    expect(row.risk_level).toBe('medium');
    expect(res.body.result).toEqual({ orderId: '1001', note: 'Customer asked for gift wrap' });
    expect(shop.order(1001)?.note).toBe('Customer asked for gift wrap');
    const [pd] = (await h.t.ds.query('SELECT decision FROM policy_decisions WHERE tool_call_id = $1', [res.body.toolCallId])) as { decision: string }[];
    expect(pd.decision).toBe('observe');
  });

  it('shopify_refund.create (allowed by rule) refunds once with an @idempotent key and the ledger id in the note', async () => {
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const before = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '10', note: 'damaged' });
    await succeeded(res, 5);
    expect(res.body.result).toMatchObject({ orderId: '12345', amount: '10.00', currency: 'USD', status: 'success' });
    expect(shop.refundCount(12345)).toBe(1);
    const refund = shop.order(12345)!.refunds[0];
    expect(refund.amountCents).toBe(1000);
    expect(refund.note).toContain(`[tool-gateway call ${res.body.toolCallId}]`);
    const mutation = h.emu.requests.slice(before).find((r) => r.body.includes('refundCreate'));
    expect(mutation?.body).toMatch(/@idempotent\(key: \\"[0-9a-f-]{36}\\"\)/);
  });

  it('amazon_query.get_order exchanges the refresh token once and sends x-amz-access-token and a User-Agent', async () => {
    const before = h.emu.requests.length;
    const res = await call(h, org, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped });
    await succeeded(res, 0);
    expect(res.body.result).toMatchObject({
      orderId: AMAZON_ORDER_IDS.shipped, status: 'Shipped', fulfillmentChannel: 'MFN', orderTotal: { currency: 'USD', amount: '64.98' },
    });
    const sent = h.emu.requests.slice(before);
    expect(sent.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /auth/o2/token', `GET /orders/v0/orders/${AMAZON_ORDER_IDS.shipped}`]);
    expect(sent[0].body).toContain('grant_type=refresh_token');
    expect(sent[1].headers['x-amz-access-token']).toMatch(/^Atza\|/);
    expect(sent[1].headers['user-agent']).toMatch(/\S/);
  });

  it('amazon_query.get_order_items follows NextToken through every page', async () => {
    const before = h.emu.count({ vendor: 'amazon', path: /orderItems$/ });
    const res = await call(h, org, 'amazon_query', { action: 'get_order_items', orderId: AMAZON_ORDER_IDS.paged });
    await succeeded(res, 0);
    const result = res.body.result as { orderId: string; items: { sku: string }[] };
    expect(result.orderId).toBe(AMAZON_ORDER_IDS.paged);
    expect(result.items.map((i) => i.sku)).toEqual(['EMU-SKU-101', 'EMU-SKU-102', 'EMU-SKU-103', 'EMU-SKU-104', 'EMU-SKU-105']);
    expect(h.emu.count({ vendor: 'amazon', path: /orderItems$/ }) - before).toBe(3);
  });

  it('amazon_query.get_order_items stops at a NextToken SP-API answers again: each item once, truncated', async () => {
    const amazon = h.emu.vendor<AmazonEmulator>('amazon');
    amazon.loopItemsPages({ from: 2, to: 2 }); // page 2 answers its own NextToken again
    try {
      const before = h.emu.count({ vendor: 'amazon', path: /orderItems$/ });
      const res = await call(h, org, 'amazon_query', { action: 'get_order_items', orderId: AMAZON_ORDER_IDS.paged });
      await succeeded(res, 0);
      const result = res.body.result as { items: { sku: string }[]; truncated?: boolean };
      expect(result.items.map((i) => i.sku)).toEqual(['EMU-SKU-101', 'EMU-SKU-102']);
      expect(result.truncated).toBe(true);
      expect(h.emu.count({ vendor: 'amazon', path: /orderItems$/ }) - before).toBe(2);
    } finally {
      amazon.loopItemsPages(undefined);
    }
  });

  it('kyc.get_status returns decisions only: no document number, date of birth, names, address or image links anywhere', async () => {
    const res = await call(h, org, 'kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.processed });
    await succeeded(res, 0);
    expect(res.body.result).toEqual({
      workflowExecutionId: JUMIO_EXECUTION_IDS.processed,
      status: 'PROCESSED',
      decision: { type: 'WARNING', label: 'WARNING', riskScore: 50 },
      capabilities: { usability: 'PASSED', similarity: 'WARNING', liveness: 'PASSED', extraction: 'PASSED', dataChecks: 'PASSED' },
      completedAt: '2026-08-04T11:03:41.000Z',
    });
    // The emulator really did hand over the PII (details fetched once, when PROCESSED).
    const details = h.emu.requests.filter((r) => r.vendor === 'jumio' && r.path.endsWith(JUMIO_EXECUTION_IDS.processed));
    expect(details).toHaveLength(1);
    const id = res.body.toolCallId as string;
    const row = JSON.stringify(await rowOf(h, id));
    const events = JSON.stringify(await eventsOf(h, id));
    const replay = await send(h, org, toolUse('kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.processed }));
    const got = await h.t.http.get(`/v1/tool-calls/${id}/result`).set({ Authorization: `Bearer ${org.agentKey}` });
    const logs = h.t.logs.join('\n');
    for (const text of [JSON.stringify(res.body), row, events, JSON.stringify(replay.body), JSON.stringify(got.body), logs]) {
      for (const pii of Object.values(JUMIO_FIXTURE_PII)) expect(text).not.toContain(pii);
      expect(text).not.toMatch(/documentNumber|dateOfBirth|firstName|lastName/);
    }
  });

  it('kyc.get_status of an execution still in progress gives the status only', async () => {
    const res = await call(h, org, 'kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.initiated });
    await succeeded(res, 0);
    expect(res.body.result).toEqual({ workflowExecutionId: JUMIO_EXECUTION_IDS.initiated, status: 'INITIATED' });
  });

  it('nango_proxy.get builds Connection-Id, Provider-Config-Key and the host from config', async () => {
    const before = h.emu.requests.length;
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: '/v1/customers/42', query: { limit: 10, q: 'a b&c' } });
    await succeeded(res, 0);
    expect(res.body.result).toEqual({ path: '/v1/customers/42', query: { limit: '10', q: 'a b&c' }, connectionId: NANGO_EMULATOR_CREDENTIALS.connectionId });
    const [sent] = h.emu.requests.slice(before);
    expect(sent.path).toBe('/proxy/v1/customers/42');
    expect(sent.headers).toMatchObject({
      'connection-id': NANGO_EMULATOR_CREDENTIALS.connectionId,
      'provider-config-key': NANGO_EMULATOR_CREDENTIALS.providerConfigKey,
      authorization: `Bearer ${NANGO_EMULATOR_CREDENTIALS.secretKey}`,
    });
    expect(sent.headers.retries).toBeUndefined();
  });

  it('nango_proxy.post (allowed by rule) forwards the body once, without a Retries header', async () => {
    const nango = h.emu.vendor<NangoEmulator>('nango');
    const before = h.emu.requests.length;
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'hello', n: 1 } });
    await succeeded(res, 0);
    expect(res.body.result).toMatchObject({ received: { text: 'hello', n: 1 } });
    expect(nango.posts.at(-1)).toMatchObject({ path: '/v1/notes', body: { text: 'hello', n: 1 } });
    const sent = h.emu.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0].headers.retries).toBeUndefined();
    expect(nango.retriesHeaders).toEqual([]);
  });

  it('unknown ids at each vendor → failed / VENDOR_NOT_FOUND, charged, not retried', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['order_lookup', { action: 'lookup', orderId: '999999' }, /graphql\.json$/],
      ['shopify_query', { action: 'get_product', productId: '999999' }, /graphql\.json$/],
      ['amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.unknown }, /^\/orders\//],
      ['kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.unknown }, /workflow-executions/],
      ['nango_proxy', { action: 'get', path: '/missing/thing' }, /^\/proxy\//],
    ];
    for (const [tool, input, path] of cases) {
      const before = h.emu.count({ path });
      const res = await call(h, org, tool, input);
      expect(res.status, tool).toBe(200);
      expect(res.body, tool).toMatchObject({ status: 'failed', errorCode: 'VENDOR_NOT_FOUND', toolResult: { is_error: true } });
      expect(res.body.toolResult.content).toMatch(/no record/);
      expect(h.emu.count({ path }) - before, tool).toBe(1);
      expect((await rowOf(h, res.body.toolCallId)).retry_count, tool).toBe(0);
    }
  });
});
