import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse } from './support.js';

/**
 * A vendor outage keeps an org × vendor breaker open; the approvals sweep runs every 5 s. An approved call deferred by
 * the open breaker should be said once (with org and vendor), not on every sweep for as long as the breaker stays open.
 */
describe('approved calls deferred by an open breaker are logged once', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ CIRCUIT_BREAKER_THRESHOLD: '1', CIRCUIT_BREAKER_COOLDOWN_MS: '600000', VENDOR_MAX_RETRIES: '0', APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    h?.emu.clearFaults();
    await h?.close();
  });

  it('one line per deferred call, not one per sweep, and it names orgId and vendor', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00'));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, times: Infinity });
    const failed = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(failed.body.errorCode).toBe('VENDOR_ERROR');
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const deferredLines = () => h.t.logs.filter((l) => l.includes('approved call deferred') && l.includes(id));
    await waitFor(() => deferredLines().length > 0, 'deferred');
    const runner = h.t.app.get(ApprovedCallRunner);
    for (let i = 0; i < 6; i++) await runner.tick(); // 30 s of sweeps (every 5 s) while the breaker stays open
    await new Promise((r) => setTimeout(r, 300));
    const lines = deferredLines().map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.length).toBeLessThanOrEqual(1);
    expect(lines[0]).toMatchObject({ orgId: org.orgId, vendor: 'shopify' });
  });
});
