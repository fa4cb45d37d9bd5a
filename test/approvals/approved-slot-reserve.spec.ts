import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
