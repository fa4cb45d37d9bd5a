import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

const addNote = (orderId: string, note: string) => toolUse('shopify_order', { action: 'add_note', orderId, note });

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
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1500, bodyMatch: /first: refund issued/ });
    const post = () => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: uses });
    const original = post().then((r) => r); // supertest sends on then()
    await new Promise((r) => setTimeout(r, 400)); // the first write is at the vendor now
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
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1200, bodyMatch: /alone first/ });
    expect((await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(b)).body.status).toBe('succeeded');
    const slow = h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(a).then((r) => r);
    await new Promise((r) => setTimeout(r, 300));
    const batch = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: [a, b] });
    expect(batch.body.results[0]).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS' });
    expect(batch.body.results[1]).toMatchObject({ status: 'succeeded', replayed: true });
    expect((await slow).body.status).toBe('succeeded');
  });
});
