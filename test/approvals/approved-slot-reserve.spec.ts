import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * README: an approved call with no free slot of its org × vendor "stays approved and the next sweep, within 5 s, runs
 * it". With VENDOR_CONCURRENCY_LIMIT=1 and another conversation of the org calling Shopify back to back, the approved
 * refund waited for as long as the calls kept coming (minimum-settings review: 40 lookups, 3 deferrals, still approved
 * after 12 s): each direct call took the slot the moment it was given back. The deferred call now reserves the next
 * free slot: new calls there are refused (429, as for a full limit) until it takes it.
 */
describe('approvals: an approved call beside steady direct calls on a limit of 1', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '1', APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    h?.emu.clearFaults();
    await h?.close();
  });

  it('the approved refund runs within a sweep or two of its approval, and the direct calls go on after it', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00'));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);

    h.emu.fault({ vendor: 'shopify', path: /graphql/, kind: 'delay', delayMs: 300, times: Infinity });
    let stop = false;
    const looked: string[] = [];
    const loop = (async () => {
      while (!stop) {
        const r = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
        looked.push(r.status === 429 ? (r.body.code as string) : (r.body.status as string));
        if (r.status === 429) await sleep(Number(r.headers['retry-after'] ?? 1) * 1000);
      }
    })();
    try {
      await sleep(200);
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect(decided.status).toBe(200);
      const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=12000`).set(bearer(org.agentKey));
      expect(settled.body.status).toBe('succeeded');
      await sleep(1_500); // the lookups go on once it has run
    } finally {
      stop = true;
      await loop;
      h.emu.clearFaults();
    }
    expect(looked.filter((s) => s === 'CONCURRENCY_LIMIT').length).toBeGreaterThanOrEqual(1); // held back for it
    expect(looked.at(-1)).toBe('succeeded');
  }, 40_000);

  it('the slot given back runs the waiting approved call at once, not at the next sweep: a 429 told to retry in a second is then admitted', async () => {
    const runner = h.t.app.get(ApprovedCallRunner) as unknown as { tick: (...a: unknown[]) => Promise<unknown> };
    const ticks: number[] = [];
    const tick = runner.tick.bind(runner);
    runner.tick = (...a: unknown[]) => (ticks.push(performance.now()), tick(...a));
    try {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
      const expert = await createKey(h.t, org.orgId, 'expert');
      const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00'));
      expect(posted.status).toBe(202);
      const id = posted.body.toolCallId as string;
      const approval = await approvalFor(h, expert.key, id);
      // Right after a sweep: the next is ~5 s away.
      const n = ticks.length;
      while (ticks.length === n) await sleep(20);
      h.emu.fault({ vendor: 'shopify', path: /graphql/, kind: 'delay', delayMs: 600, times: 1 });
      const direct = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
      await sleep(150);
      // Approved while the direct call holds the only slot: deferred, the slot kept for it.
      expect((await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest })).status).toBe(200);
      const refused = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      expect([refused.status, refused.body.code, refused.headers['retry-after']]).toEqual([429, 'CONCURRENCY_LIMIT', '1']);
      expect((await direct).body.status).toBe('succeeded');
      const sweepsBefore = ticks.length;
      const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=3000`).set(bearer(org.agentKey));
      expect(settled.body.status).toBe('succeeded');
      expect(ticks.length).toBe(sweepsBefore); // run by the slot given back, no sweep between
      await sleep(1_000); // as the 429 said
      const retried = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      expect(retried.body.status).toBe('succeeded');
    } finally {
      runner.tick = tick;
      h.emu.clearFaults();
    }
  }, 40_000);
});
