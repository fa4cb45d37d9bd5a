import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * Anthropic's Messages API refuses a turn in which a tool_use has no tool_result. A problem answered to a tool_use (no
 * ledger row shown: a batch write held behind one waiting for approval, a single call refused 409 or 422) gave the
 * runtime nothing to hand the model, not even the item's tool_use id; it now carries `toolUseId` and `toolResult`
 * (is_error, fixed wording for the model), as a tool-call body does. Never for an id the gateway would not take or one
 * shaped like a credential (not echoed).
 */
describe('problem answers to a tool_use carry the model\'s tool_result', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('a batch write held behind a refund waiting for approval: 409 IDEMPOTENCY_IN_PROGRESS with its tool_use id and a tool_result saying it has not finished yet', async () => {
    const o = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note'] });
    const refund = toolUse('shopify_refund', { action: 'create', orderId: '1001', amount: '1.00' });
    const note = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'refund asked' });
    const res = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(bearer(o.agentKey)).send({ toolUses: [refund, note] });
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: 'waiting_approval', toolResult: { tool_use_id: refund.id, is_error: false } });
    const held = res.body.results[1];
    expect(held).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS', toolUseId: note.id });
    expect(held.toolResult).toEqual({ type: 'tool_result', tool_use_id: note.id, is_error: true, content: expect.stringMatching(/^This action has not finished yet: .*waiting for a human approval/) });
  });

  it('single calls: 422 IDEMPOTENCY_KEY_REUSED and 409 RUN_NOT_ACTIVE say the action was not run, and why', async () => {
    const o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const post = (id: string, orderId: string) => h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId }, id));
    expect((await post('call_0', '1001')).status).toBe(200);
    const reused = await post('call_0', '1002');
    expect([reused.status, reused.body.code, reused.body.toolUseId]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED', 'call_0']);
    expect(reused.body.toolResult).toEqual({ type: 'tool_result', tool_use_id: 'call_0', is_error: true, content: 'This action was not run: its id was already used for a different action.' });
    expect((await h.t.http.post(`/v1/runs/${o.runId}/complete`).set(bearer(o.agentKey)).send({})).status).toBe(200);
    const ended = await post('call_1', '1003');
    expect([ended.status, ended.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect(ended.body.toolResult).toMatchObject({ tool_use_id: 'call_1', is_error: true, content: 'This action was not run: the session it belongs to has ended.' });
  });

  it('a single call whose database read fails (503) or that fails unexpectedly (500) carries one too: neither says the action was not run', async () => {
    const o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const calls = h.t.app.get(ToolCallsService);
    const original = calls.submit.bind(calls);
    const failures = [
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }), // the database dropped the read
      new TypeError('unexpected'),
    ];
    calls.submit = () => Promise.reject(failures.shift()!);
    try {
      const post = (id: string) => h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }, id));
      const unavailable = await post('toolu_db');
      expect([unavailable.status, unavailable.body.code, unavailable.body.toolUseId]).toEqual([503, 'DATABASE_UNAVAILABLE', 'toolu_db']);
      // A resent action is read from the ledger: it may have run before.
      expect(unavailable.body.toolResult).toMatchObject({ tool_use_id: 'toolu_db', is_error: true, content: expect.stringMatching(/If this same action was requested before, it may already have run/) });
      const internal = await post('toolu_bug');
      expect([internal.status, internal.body.code]).toEqual([500, 'INTERNAL']);
      expect(internal.body.toolResult).toMatchObject({ tool_use_id: 'toolu_bug', is_error: true, content: 'The tool service could not answer for this action (INTERNAL); it is not known whether it ran.' });
    } finally {
      calls.submit = original;
    }
  });

  it('no tool_result for a block whose id the gateway would not take, nor for one shaped like a credential (never echoed)', async () => {
    const o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const post = (body: object) => h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(body);
    const credential = `ghp_${'A1b2C3d4E5'.repeat(4)}`.slice(0, 40);
    const shaped = await post(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }, credential));
    expect(shaped.status).toBe(400);
    expect(JSON.stringify(shaped.body)).not.toContain(credential);
    expect(shaped.body.toolResult).toBeUndefined();
    const spaced = await post(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }, 'has space'));
    expect([spaced.status, spaced.body.toolResult]).toEqual([400, undefined]);
    // A block of another shape with a good id: the runtime's slip, still answerable to the model.
    const unknownField = await post({ ...toolUse('order_lookup', { action: 'lookup', orderId: '1001' }, 'toolu_x1'), function: {} });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.toolResult).toEqual({
      type: 'tool_result', tool_use_id: 'toolu_x1', is_error: true, content: 'This action was not run: the tool service refused the request for it (BAD_REQUEST).',
    });
  });
});
