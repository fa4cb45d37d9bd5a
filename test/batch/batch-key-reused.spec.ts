import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor } from '../approvals/support.js';

const ORDER = '12345';
const refund = (amount: string, id?: string) => toolUse('shopify_refund', { action: 'create', orderId: ORDER, amount }, id);
const addNote = (note: string, id?: string) => toolUse('shopify_order', { action: 'add_note', orderId: ORDER, note }, id);
const lookup = (id?: string) => toolUse('order_lookup', { action: 'lookup', orderId: ORDER }, id);

type Entry = Record<string, unknown> & { status: unknown; code?: string; errorCode?: string | null };
const shape = (results: Entry[]) => results.map((r) => [r.status, r.code ?? r.errorCode ?? null]);

/** The 422's problem+json, exactly as a single call answers it: nothing about the stored call leaks into it. */
/** A problem answered to a tool_use: its own fields and the model's tool_result, nothing of the stored call. */
const PROBLEM_KEYS = ['code', 'correlationId', 'detail', 'status', 'title', 'toolResult', 'toolUseId', 'type'];

/**
 * API.md §4: in a batch, "writes run one at a time in order". A write resent under its tool_use id with another
 * input is refused 422 IDEMPOTENCY_KEY_REUSED and never runs, but the call first sent under that id may not have
 * run yet (waiting for approval, or still at the vendor): the writes after it must wait for that call, or a note
 * "refund issued" would reach Shopify before the refund it follows.
 */
describe('batch: a write refused 422 IDEMPOTENCY_KEY_REUSED holds the writes after it while the call under its id has not run', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const post = (runId: string, key: string, toolUses: unknown[]) => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(key)).send({ toolUses });
  const sent = (from: number, body: RegExp) => h.emu.requests.slice(from).filter((r) => body.test(r.body));

  it('behind a refund waiting for approval: the note is held (409, not sent), reads run; once the refund ran, the note runs after it', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note', 'order_lookup.lookup'] });
    const expert = await createKey(h.t, orgId, 'expert');
    const first = refund('2.00');
    const note = addNote('422: after the refund');
    const from = h.emu.requests.length;

    const one = await post(runId, agentKey, [first, note]);
    expect(shape(one.body.results as Entry[])).toEqual([
      ['waiting_approval', null],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);
    const toolCallId = one.body.results[0].toolCallId as string;

    // Resent with the refund's amount changed under the same tool_use id.
    const changed = refund('3.00', first.id);
    const two = await post(runId, agentKey, [changed, note, lookup()]);
    expect(two.status).toBe(200);
    const results = two.body.results as Entry[];
    expect(shape(results)).toEqual([
      [422, 'IDEMPOTENCY_KEY_REUSED'],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
      ['succeeded', null],
    ]);
    expect(Object.keys(results[0]).sort()).toEqual(PROBLEM_KEYS);
    expect(results[0].detail).toBe('this tool_use id was already used in this run for a different action: a tool_use id names one call of its run (a new call needs its own id)');
    expect(String(results[1].detail)).toMatch(/toolUses\[0\].*IDEMPOTENCY_KEY_REUSED.*waiting for approval.*not started/);
    expect(results[1].retryAfterSeconds).toBe(5);
    expect(sent(from, /422: after the refund/)).toHaveLength(0);
    // Held, not refused: no row for the note.
    const rows = (await h.t.ds.query(`SELECT action FROM tool_calls WHERE run_id = $1 ORDER BY created_at`, [runId])) as { action: string }[];
    expect(rows.map((r) => r.action)).toEqual(['create', 'lookup']);

    // The single-call 422 for the same resend is unchanged too.
    const single = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(changed);
    expect(single.status).toBe(422);
    expect(Object.keys(single.body).sort()).toEqual(PROBLEM_KEYS);
    expect(single.text).not.toMatch(/waiting_approval|storedStatus|storedCall|shopify_refund/);

    const approval = await approvalFor(h, expert.key, toolCallId);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const ran = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result?waitMs=10000`).set(bearer(agentKey));
    expect(ran.body.status).toBe('succeeded');

    // The call under the id has settled: the 422 holds nothing now, the note runs, after the refund.
    const three = await post(runId, agentKey, [changed, note]);
    expect(shape(three.body.results as Entry[])).toEqual([
      [422, 'IDEMPOTENCY_KEY_REUSED'],
      ['succeeded', null],
    ]);
    const refundsSent = sent(from, /refundCreate/);
    const notesSent = sent(from, /422: after the refund/);
    expect([refundsSent.length, notesSent.length]).toEqual([1, 1]);
    expect(notesSent[0]!.receivedAt).toBeGreaterThanOrEqual(refundsSent[0]!.finishedAt!);
  });

  it('behind a write still at the vendor: the note is held (409, not sent) until that call has finished', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const slowUse = addNote('422: slow first note');
    const second = addNote('422: second note');
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, bodyMatch: /422: slow first note/ });
    const from = h.emu.requests.length;
    // Posted alone first (an earlier post whose answer the runtime lost); it is at the vendor, slow.
    const slow = h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(slowUse).then((r) => r);
    await waitFor(() => sent(from, /422: slow first note/).length > 0, 'the slow note at the vendor');

    const batch = await post(runId, agentKey, [addNote('422: another first note', slowUse.id), second]);
    const results = batch.body.results as Entry[];
    expect(shape(results)).toEqual([
      [422, 'IDEMPOTENCY_KEY_REUSED'],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);
    expect(Object.keys(results[0]).sort()).toEqual(PROBLEM_KEYS);
    expect(String(results[1].detail)).toMatch(/toolUses\[0\].*IDEMPOTENCY_KEY_REUSED.*has not finished.*not started/);
    expect(results[1].retryAfterSeconds).toBe(1);
    expect((await slow).body.status).toBe('succeeded');
    // Not sent by the held batch, even after the first note finished.
    expect(sent(from, /422: second note/)).toHaveLength(0);

    const again = await post(runId, agentKey, [addNote('422: another first note', slowUse.id), second]);
    expect(shape(again.body.results as Entry[])).toEqual([
      [422, 'IDEMPOTENCY_KEY_REUSED'],
      ['succeeded', null],
    ]);
    const firstSent = sent(from, /422: slow first note/);
    const secondSent = sent(from, /422: second note/);
    expect([firstSent.length, secondSent.length, sent(from, /another first note/).length]).toEqual([1, 1, 0]);
    expect(secondSent[0]!.receivedAt).toBeGreaterThanOrEqual(firstSent[0]!.finishedAt!);
  });

  it('the refund id resent as a lookup: judged by the refund, so the note after it is held (409, not sent) while the refund awaits approval', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note', 'order_lookup.lookup'] });
    const first = refund('2.00');
    const one = await post(runId, agentKey, [first]);
    expect(shape(one.body.results as Entry[])).toEqual([['waiting_approval', null]]);
    const from = h.emu.requests.length;

    const note = addNote('422 read: after the refund');
    const two = await post(runId, agentKey, [lookup(first.id), note]);
    const results = two.body.results as Entry[];
    expect(shape(results)).toEqual([
      [422, 'IDEMPOTENCY_KEY_REUSED'],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);
    expect(Object.keys(results[0]).sort()).toEqual(PROBLEM_KEYS);
    expect(String(results[1].detail)).toMatch(/toolUses\[0\].*IDEMPOTENCY_KEY_REUSED.*waiting for approval.*not started/);
    expect(sent(from, /422 read: after the refund/)).toHaveLength(0);
    // Neither the lookup (refused) nor the note (held) reached the vendor or the ledger.
    expect(sent(from, /OrderLookup/)).toHaveLength(0);
    const rows = (await h.t.ds.query(`SELECT action FROM tool_calls WHERE run_id = $1 ORDER BY created_at`, [runId])) as { action: string }[];
    expect(rows.map((r) => r.action)).toEqual(['create']);
  });

  it('a lookup id still at the vendor resent as a note: a read holds nothing, the note after it runs', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_order.add_note', 'order_lookup.lookup'] });
    const slowRead = lookup();
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, bodyMatch: /OrderLookup/ });
    const from = h.emu.requests.length;
    const slow = h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(slowRead).then((r) => r);
    await waitFor(() => sent(from, /OrderLookup/).length > 0, 'the slow lookup at the vendor');

    const batch = await post(runId, agentKey, [addNote('422 read: resent under the lookup', slowRead.id), addNote('422 read: next note')]);
    expect(shape(batch.body.results as Entry[])).toEqual([
      [422, 'IDEMPOTENCY_KEY_REUSED'],
      ['succeeded', null],
    ]);
    expect((await slow).body.status).toBe('succeeded');
    expect([sent(from, /422 read: resent under the lookup/).length, sent(from, /422 read: next note/).length]).toEqual([0, 1]);
  });
});
