import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { refunds } from './support.js';

/**
 * The approvals sweep starts approved calls nobody has started (approved on a
 * replica that died, or deferred because the org × vendor limit was full). One
 * org's backlog of such calls must not hold back another org's call until it
 * has drained: the sweep takes each org × vendor's calls in turns.
 */
describe('approved calls: one org’s backlog does not starve another org', () => {
  let h: Harness;
  let busy: OrgSetup;
  let other: OrgSetup;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    busy = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    other = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Posts refunds that wait for approval, then approves them as a decision would (without starting them). */
  async function approvedRefunds(org: OrgSetup, n: number, amount: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i += 20) {
      const posted = await Promise.all(
        Array.from({ length: Math.min(20, n - i) }, () => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount }))),
      );
      for (const res of posted) {
        expect(res.status, res.text).toBe(202);
        ids.push(res.body.toolCallId as string);
      }
    }
    await h.t.ds.query(
      `WITH a AS (UPDATE approval_requests SET status = 'approved', decided_at = now() WHERE tool_call_id = ANY($1) AND status = 'pending' RETURNING tool_call_id)
       UPDATE tool_calls SET status = 'approved', updated_at = clock_timestamp() WHERE id IN (SELECT tool_call_id FROM a)`,
      [ids],
    );
    return ids;
  }

  it('a call of another org is started by the next sweep, though 101 older approved calls of one org wait for its vendor slots', async () => {
    const backlog = await approvedRefunds(busy, 101, '0.01');
    const [mine] = await approvedRefunds(other, 1, '1.00');
    const calls = h.t.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(busy.orgId, 'shopify'); r; r = calls.leaseFor(busy.orgId, 'shopify')) held.push(r);
    const before = refunds(h, '450789469');
    try {
      await h.t.app.get(ApprovedCallRunner).sweep();
      const done = await h.t.http.get(`/v1/tool-calls/${mine}/result?waitMs=10000`).set(bearer(other.agentKey));
      expect(done.body.status).toBe('succeeded');
      expect(refunds(h, '450789469') - before).toBe(1);
      const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM tool_calls WHERE id = ANY($1) AND status = 'approved'`, [backlog])) as { n: number }[];
      expect(n).toBe(101); // still waiting for their org's slots
    } finally {
      for (const r of held) r();
      // The backlog is not this test's business: turned off, the next claims block it without a vendor call.
      await h.t.http.put(`/v1/orgs/${busy.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
    }
  });
});
