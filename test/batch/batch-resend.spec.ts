import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor } from '../approvals/support.js';

const addNote = (orderId: string, note: string) => toolUse('shopify_order', { action: 'add_note', orderId, note });
/** Resolves once a request (recorded since `from`) whose body matches has reached the vendor emulator. */
const atVendor = (h: Harness, from: number, body: RegExp) =>
  waitFor(() => h.emu.requests.slice(from).some((r) => body.test(r.body)), `a request matching ${body} at the vendor`);

/**
 * An agent runtime whose HTTP client timed out sends the batch again while its first post is still
 * running. API.md §4: "writes run one at a time in order" must hold across the two posts.
 */
describe('batch sent again while its first post still runs', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the resend starts nothing after the write still at the vendor: the second write runs once, after the first answered', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const uses = [addNote('450789469', 'first: refund issued'), addNote('450789469', 'second: customer informed')];
    const from = h.emu.requests.length;
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_500, bodyMatch: /first: refund issued/ });
    const post = () => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: uses });
    const original = post().then((r) => r); // supertest sends on then()
    await atVendor(h, from, /first: refund issued/);
    const resend = await post();
    const first = await original;

    expect(first.status).toBe(200);
    expect(first.body.results.map((r: { status: string }) => r.status)).toEqual(['succeeded', 'succeeded']);
    // The resend: the first item is still executing, the second was not started (both say "later", neither failed).
    expect(resend.status).toBe(200);
    expect(resend.body.results.map((r: { status: number; code: string }) => [r.status, r.code])).toEqual([
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);

    const writes = h.emu.requests.slice(from).filter((r) => /orderUpdate/.test(r.body));
    const w1 = writes.filter((r) => /first: refund issued/.test(r.body));
    const w2 = writes.filter((r) => /second: customer informed/.test(r.body));
    expect([w1.length, w2.length]).toEqual([1, 1]);
    expect(w2[0]!.receivedAt).toBeGreaterThanOrEqual(w1[0]!.finishedAt!);
    expect(h.emu.vendor<ShopifyEmulator>('shopify').order('450789469')?.note).toBe('second: customer informed');

    // Sent once more after it finished: both replayed, nothing new at the vendor.
    const again = await post();
    expect(again.body.results.map((r: { status: string; replayed: boolean }) => [r.status, r.replayed])).toEqual([
      ['succeeded', true],
      ['succeeded', true],
    ]);
    expect(h.emu.requests.slice(from).filter((r) => /orderUpdate/.test(r.body))).toHaveLength(2);
  });

  it('items after an executing one that already ran are still replayed, not refused', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const a = addNote('450789469', 'alone first');
    const b = addNote('450789469', 'then in the batch');
    // The first tool_use is posted alone and is slow; the batch (same tool_use ids) is sent while it runs,
    // after b already ran by itself.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_500, bodyMatch: /alone first/ });
    expect((await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(b)).body.status).toBe('succeeded');
    const from = h.emu.requests.length;
    const slow = h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(a).then((r) => r);
    await atVendor(h, from, /alone first/);
    const batch = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: [a, b] });
    expect(batch.body.results[0]).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS' });
    expect(batch.body.results[1]).toMatchObject({ status: 'succeeded', replayed: true });
    expect((await slow).body.status).toBe('succeeded');
  });
});

/**
 * A write waiting for approval has not run: API.md §4 "writes run one at a time in order" means the writes
 * after it wait too (a note saying "refund issued" must not reach Shopify before the refund, which may yet be
 * rejected). Reads after it still run.
 */
describe('batch with a write waiting for approval', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('holds the writes after it (409, nothing recorded, nothing sent), runs the reads; once decided and run, a resend runs them in order', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note', 'order_lookup.lookup'] });
    const expert = await createKey(h.t, orgId, 'expert');
    const uses = [
      toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '2.00' }),
      addNote('12345', 'held: refund issued'),
      toolUse('order_lookup', { action: 'lookup', orderId: '12345' }),
    ];
    const from = h.emu.requests.length;
    const post = () => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: uses });
    const first = await post();
    expect(first.status).toBe(200);
    const [refund, note, lookup] = first.body.results as Record<string, unknown>[];
    expect(refund).toMatchObject({ status: 'waiting_approval' });
    expect(note).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS' });
    expect(String(note.detail)).toMatch(/waiting for approval/);
    expect(lookup).toMatchObject({ status: 'succeeded' });
    expect(h.emu.requests.slice(from).filter((r) => /held: refund issued/.test(r.body))).toHaveLength(0);
    const rows = (await h.t.ds.query(`SELECT action FROM tool_calls WHERE run_id = $1 ORDER BY created_at`, [runId])) as { action: string }[];
    expect(rows.map((r) => r.action)).toEqual(['create', 'lookup']);

    // Sent again while still pending: still held.
    expect((await post()).body.results[1]).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS' });

    const approval = await approvalFor(h, expert.key, refund.toolCallId as string);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const ran = await h.t.http.get(`/v1/tool-calls/${refund.toolCallId as string}/result?waitMs=10000`).set(bearer(agentKey));
    expect(ran.body.status).toBe('succeeded');

    const after = await post();
    expect(after.body.results.map((r: { status: string }) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const refundAt = h.emu.requests.slice(from).find((r) => /refundCreate/.test(r.body))!;
    const noteAt = h.emu.requests.slice(from).filter((r) => /held: refund issued/.test(r.body));
    expect(noteAt).toHaveLength(1);
    expect(noteAt[0]!.receivedAt).toBeGreaterThanOrEqual(refundAt.finishedAt!);
  });

  it('a write behind it whose own call is still at the vendor (a resend) still holds everything after it, reads too', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note', 'order_lookup.lookup'] });
    const refund = toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '2.00' });
    const note = addNote('450789469', 'slow note behind an approval');
    const lookup = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    expect((await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(refund)).status).toBe(202);
    // The note is at the vendor (slow): an earlier post whose answer the runtime lost.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2000, bodyMatch: /slow note behind an approval/ });
    const sentFrom = h.emu.requests.length;
    const slow = h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(note).then((r) => r);
    await atVendor(h, sentFrom, /slow note behind an approval/);
    const from = h.emu.requests.length;
    const batch = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: [refund, note, lookup] });
    expect(batch.body.results.map((r: { status: unknown; code?: string }) => [r.status, r.code ?? null])).toEqual([
      ['waiting_approval', null],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
      [409, 'IDEMPOTENCY_IN_PROGRESS'],
    ]);
    expect(h.emu.requests.slice(from).filter((r) => /OrderLookup/.test(r.body))).toHaveLength(0);
    expect((await slow).body.status).toBe('succeeded');
  });

  it('a rejected refund releases the writes after it too (they run on the resend; the refund stays blocked)', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note'] });
    const expert = await createKey(h.t, orgId, 'expert');
    const uses = [toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '3.00' }), addNote('12345', 'after a rejected refund')];
    const post = () => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: uses });
    const first = await post();
    expect(first.body.results[1]).toMatchObject({ status: 409 });
    const approval = await approvalFor(h, expert.key, first.body.results[0].toolCallId as string);
    await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: approval.actionDigest });
    const after = await post();
    expect(after.body.results.map((r: { status: string; errorCode: string | null }) => [r.status, r.errorCode])).toEqual([
      ['blocked', 'EXPERT_REJECTED'],
      ['succeeded', null],
    ]);
  });
});
