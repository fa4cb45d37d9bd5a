import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse, refunds } from './support.js';

/**
 * An approval decided while the org × vendor circuit breaker is open (minimum-settings review, with
 * CIRCUIT_BREAKER_THRESHOLD=1 one failed lookup opens it): the call was claimed and failed CIRCUIT_OPEN, nothing sent,
 * and the approval used up — the agent had to ask a human again. It stays approved, as for a full concurrency slot,
 * and a sweep after the cooldown runs it. Said once, not on every sweep meanwhile.
 */
describe('approvals: an approved call while the breaker is open', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ CIRCUIT_BREAKER_THRESHOLD: '1', CIRCUIT_BREAKER_COOLDOWN_MS: '30000', VENDOR_MAX_RETRIES: '0', APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    h?.emu.clearFaults();
    await h?.close();
  });

  it('stays approved, nothing sent, and runs once the cooldown is over', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00'));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 502, times: 1 });
    const failed = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(failed.body.errorCode).toBe('VENDOR_ERROR'); // the breaker is open now
    const before = refunds(h);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const said = () => h.t.logs.some((l) => l.includes('approved call deferred: the org × vendor circuit breaker is open') && l.includes(id));
    await waitFor(said, 'the decision’s attempt to be deferred by the open breaker');
    const runner = h.t.app.get(ApprovedCallRunner);
    await runner.sweep(); // within the cooldown: deferred again
    await runner.sweep();
    // Said once, with its org and vendor, not again on every sweep (every 5 s) for as long as the breaker stays open.
    const deferred = h.t.logs.filter((l) => l.includes('approved call deferred') && l.includes(id)).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(deferred).toHaveLength(1);
    expect(deferred[0]).toMatchObject({ toolCallId: id, orgId: org.orgId, vendor: 'shopify' });
    const status = async () => ((await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [id])) as { status: string }[])[0]!.status;
    expect([await status(), refunds(h) - before]).toEqual(['approved', 0]);

    h.t.app.get(Clock).advance(30_000); // the cooldown is over (the breaker runs on the Clock's elapsed time)
    try {
      await runner.sweep();
      const result = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=10000`).set(bearer(org.agentKey));
      expect(result.body.status).toBe('succeeded');
      expect(refunds(h) - before).toBe(1);
    } finally {
      h.t.app.get(Clock).advance(-30_000);
    }
  });
});
