import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { aroundStatements, connectionLost, refunds } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

const ORDER = '450789469';
const TOOLS = ['shopify_refund.create', 'shopify_order.add_note', 'order_lookup.lookup'];
const ALLOW_REFUNDS = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow', riskLevel: 'high', reason: 'test' }];
const refund = (amount: string) => toolUse('shopify_refund', { action: 'create', orderId: ORDER, amount });
const addNote = (note: string) => toolUse('shopify_order', { action: 'add_note', orderId: ORDER, note });
const lookup = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });

type Entry = Record<string, unknown> & { status: unknown; code?: string; errorCode?: string | null; replayed?: boolean };
const shape = (results: Entry[]) => results.map((r) => [r.status, r.code ?? r.errorCode ?? null]);

/**
 * API.md §4: in a batch, "writes run one at a time in order". A write refused before it ran, for a reason a
 * resend may overcome (429 CONCURRENCY_LIMIT, 503 DATABASE_UNAVAILABLE), has not run yet: the writes after it
 * are not started (409, as behind a write awaiting approval), or the resend would run it after them — a note
 * "refund issued" on an order nothing was refunded on. Reads still run. A write refused for good holds nothing.
 */
describe('batch: a write with no outcome yet holds the writes after it', () => {
  let h: Harness;
  beforeAll(async () => {
    // One slot per org × vendor: holding it makes the next Shopify call of the org answer 429.
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '1' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const post = (runId: string, key: string, toolUses: unknown[]) => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(key)).send({ toolUses });
  const sent = (from: number, body: RegExp) => h.emu.requests.slice(from).filter((r) => body.test(r.body));

  /** The first write checks the order: the refund reached Shopify and finished before the note did, each once. */
  function expectRefundThenNote(from: number, note: string): void {
    const refundsSent = sent(from, /refundCreate/);
    const notesSent = sent(from, new RegExp(note));
    expect([refundsSent.length, notesSent.length]).toEqual([1, 1]);
    expect(notesSent[0]!.receivedAt).toBeGreaterThanOrEqual(refundsSent[0]!.finishedAt!);
  }

  it('[refund, lookup, note]: the refund is refused 429 (slot busy); the note is not started, the lookup runs; the resend runs refund then note', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: TOOLS, rules: ALLOW_REFUNDS });
    const svc = h.t.app.get(ToolCallsService);
    // Another call of this org holds the only Shopify slot, and gives it back right after the refund was refused.
    let busy = svc.leaseFor(orgId, 'shopify');
    expect(busy).not.toBeNull();
    const submit = svc.submit.bind(svc);
    svc.submit = (async (...args: Parameters<typeof submit>) => {
      try {
        return await submit(...args);
      } catch (err) {
        if ((err as { code?: string }).code === 'CONCURRENCY_LIMIT') {
          busy?.();
          busy = null;
        }
        throw err;
      }
    }) as typeof svc.submit;
    const uses = [refund('3.00'), lookup(), addNote('429: refund of 3.00 issued')];
    const before = refunds(h, ORDER);
    const from = h.emu.requests.length;
    let first;
    try {
      first = await post(runId, agentKey, uses);
    } finally {
      svc.submit = submit;
      busy?.();
    }

    expect(first.status).toBe(200);
    const results = first.body.results as Entry[];
    expect(shape(results)).toEqual([
      [429, 'CONCURRENCY_LIMIT'],
      ['succeeded', null],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);
    expect(String(results[2].detail)).toMatch(/toolUses\[0\].*CONCURRENCY_LIMIT.*not started/);
    expect(results[2].retryAfterSeconds).toBe(1);
    expect(sent(from, /429: refund of 3.00 issued/)).toHaveLength(0);
    expect(refunds(h, ORDER) - before).toBe(0);
    // Held, not refused: nothing recorded for the refund or the note.
    const rows = (await h.t.ds.query(`SELECT action FROM tool_calls WHERE run_id = $1`, [runId])) as { action: string }[];
    expect(rows.map((r) => r.action)).toEqual(['lookup']);

    const again = await post(runId, agentKey, uses);
    expect((again.body.results as Entry[]).map((r) => [r.status, r.replayed])).toEqual([
      ['succeeded', false],
      ['succeeded', true],
      ['succeeded', false],
    ]);
    expect(refunds(h, ORDER) - before).toBe(1);
    expectRefundThenNote(from, '429: refund of 3.00 issued');

    // Once more: every item replayed, nothing new at Shopify.
    const count = h.emu.requests.length;
    expect((await post(runId, agentKey, uses)).body.results.map((r: Entry) => r.replayed)).toEqual([true, true, true]);
    expect(h.emu.requests.length).toBe(count);
  });

  it('[refund, note]: the refund’s intent meets an unavailable database (503); the note is not started; the resend runs refund then note', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS, rules: ALLOW_REFUNDS });
    const uses = [refund('4.00'), addNote('503: refund of 4.00 issued')];
    // Every attempt at the refund's intent fails as a dropped connection does, past the request's retry budget.
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (text.includes('INSERT INTO tool_calls') && params.includes(uses[0].id)) throw connectionLost();
      return send();
    });
    const before = refunds(h, ORDER);
    const from = h.emu.requests.length;
    let first;
    try {
      first = await post(runId, agentKey, uses);
    } finally {
      undo();
    }

    expect(first.status).toBe(200);
    expect(shape(first.body.results as Entry[])).toEqual([
      [503, 'DATABASE_UNAVAILABLE'],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);
    expect(sent(from, /503: refund of 4.00 issued/)).toHaveLength(0);
    expect(refunds(h, ORDER) - before).toBe(0);

    const again = await post(runId, agentKey, uses);
    expect(shape(again.body.results as Entry[])).toEqual([
      ['succeeded', null],
      ['succeeded', null],
    ]);
    expect(refunds(h, ORDER) - before).toBe(1);
    expectRefundThenNote(from, '503: refund of 4.00 issued');
  });

  it('a write refused for good (policy blocked, invalid input) holds nothing: a resend never runs it, so nothing can overtake it', async () => {
    const block = [{ id: 'no-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'block', riskLevel: 'high', reason: 'test' }];
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS, rules: block });
    const uses = [refund('5.00'), toolUse('shopify_order', { action: 'add_note', orderId: ORDER }), addNote('after refusals for good')];
    const before = refunds(h, ORDER);
    const from = h.emu.requests.length;
    const res = await post(runId, agentKey, uses);
    expect(shape(res.body.results as Entry[])).toEqual([
      ['blocked', 'POLICY_BLOCKED'],
      ['failed', 'INVALID_INPUT'],
      ['succeeded', null],
    ]);
    expect(sent(from, /after refusals for good/)).toHaveLength(1);
    expect(refunds(h, ORDER) - before).toBe(0);
  });
});
