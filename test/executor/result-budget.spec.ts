import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { truncationNote } from '../../src/executor/result-budget.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call, rowOf, send } from './support.js';

const BUDGET = 512;
/** Seeded product whose title mixes 2-, 3- and 4-byte UTF-8 characters. */
const NON_ASCII_PRODUCT = '733000001';

describe('result budgets for the model', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness({ RESULT_BUDGET_BYTES: String(BUDGET) });
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_query.get_product'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  const fullResult = (id: string) => h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));

  it('an order lookup over the budget is truncated for the model; the full result stays retrievable', async () => {
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const res = await send(h, org, use);
    const id = res.body.toolCallId as string;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', errorCode: null, truncated: true, result: null, toolResult: { is_error: false } });
    const content = res.body.toolResult.content as string;
    expect(Buffer.byteLength(content)).toBeLessThanOrEqual(BUDGET);
    expect(content).toContain(`/v1/tool-calls/${id}/result`);
    expect((await rowOf(h, id)).truncated).toBe(true);

    const full = await fullResult(id);
    expect(full.status).toBe(200);
    // The whole result; its model-facing content cut as the call's own answer was (a long-poll's toolResult is passed on too).
    expect(full.body).toMatchObject({ status: 'succeeded', truncated: true, result: { orderId: '12345', trackingNumber: 'TRACK-001' } });
    expect(full.body.toolResult.content).toBe(content);
    const fullJson = JSON.stringify(full.body.result);
    expect(Buffer.byteLength(fullJson)).toBeGreaterThan(BUDGET);
    // What the model saw is the start of the real JSON, then the note.
    expect(fullJson.startsWith(content.slice(0, content.indexOf('\n[truncated')))).toBe(true);
    expect(content).toContain(`${Buffer.byteLength(fullJson)} bytes`);

    const replay = await send(h, org, use);
    expect(replay.body).toMatchObject({ replayed: true, truncated: true, result: null });
    expect(Buffer.byteLength(replay.body.toolResult.content)).toBeLessThanOrEqual(BUDGET);
  });

  it('never splits a multi-byte character where the byte budget falls inside one', async () => {
    const res = await call(h, org, 'shopify_query', { action: 'get_product', productId: NON_ASCII_PRODUCT });
    const id = res.body.toolCallId as string;
    expect(res.body).toMatchObject({ status: 'succeeded', truncated: true });
    const full = await fullResult(id);
    const fullJson = JSON.stringify(full.body.result);
    expect(full.body.result.title).toContain('抹茶碗 🍵');

    // Precondition: a plain byte cut at the budget would land inside a character here.
    const fullBytes = Buffer.byteLength(fullJson);
    const rawCut = BUDGET - Buffer.byteLength(truncationNote(fullBytes, fullBytes, id));
    expect(Buffer.from(fullJson).subarray(0, rawCut).toString('utf8')).toContain('\uFFFD');

    const content = res.body.toolResult.content as string;
    expect(Buffer.byteLength(content)).toBeLessThanOrEqual(BUDGET);
    expect(content).not.toContain('\uFFFD');
    const shown = content.slice(0, content.indexOf('\n[truncated'));
    expect(shown.length).toBeGreaterThan(0);
    expect(fullJson.startsWith(shown)).toBe(true);
    expect(content).toContain(`/v1/tool-calls/${id}/result`);
  });

  it('a result within the budget is handed over whole', async () => {
    const res = await call(h, org, 'shopify_query', { action: 'get_product', productId: '108828309' });
    expect(res.body).toMatchObject({ status: 'succeeded', truncated: false, result: { productId: '108828309', title: 'Trail Cap' } });
    expect(JSON.parse(res.body.toolResult.content)).toEqual(res.body.result);
    expect((await rowOf(h, res.body.toolCallId)).truncated).toBe(false);
  });
});
