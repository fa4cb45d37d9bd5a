/**
 * The orphan sweep judges a running call by how long the replica that started it may hold it (tool_calls.stale_after_ms:
 * that replica's VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS, written when the call goes running), not by its own
 * configuration. In a rolling deploy that lowered VENDOR_TIMEOUT_MS by more than the margin, the new replicas' sweeps
 * marked indeterminate the calls the draining old replicas still had at their vendors — a write that then succeeded
 * read as unknown, to the agent and on every replay. Calls started before the column existed (null) are judged by the
 * sweeping replica's own configuration, as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { insertCalls, insertRun } from '../ops/ledger-seed.js';
import { approvalFor, refundUse } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey, createOrg } from '../support/test-app.js';

const VENDOR_TIMEOUT_MS = 4_000;
const STALE_RUNNING_MARGIN_MS = 30_000;
const OWN = VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS;

describe('the orphan sweep and the stale time each call carries', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: String(VENDOR_TIMEOUT_MS), STALE_RUNNING_MARGIN_MS: String(STALE_RUNNING_MARGIN_MS), APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const statusOf = async (id: string): Promise<{ status: string; stale_after_ms: number | null }> =>
    ((await h.t.ds.query('SELECT status, stale_after_ms FROM tool_calls WHERE id = $1', [id])) as { status: string; stale_after_ms: number | null }[])[0];

  it('a call running 60 s: kept when its replica may hold it 120 s, swept at 50 s, and at this replica\'s 34 s when it carries none', async () => {
    const org = await createOrg(h.t, 'stale after');
    const run = await insertRun(h.t.ds, org);
    const calls = await insertCalls(h.t.ds, [
      { orgId: org, runId: run, status: 'running', toolName: 'shopify_order', action: 'add_note' },
      { orgId: org, runId: run, status: 'running', toolName: 'shopify_order', action: 'add_note' },
      { orgId: org, runId: run, status: 'running', toolName: 'shopify_order', action: 'add_note' },
    ]);
    const [longer, shorter, none] = calls.map((c) => c.id);
    for (const [id, staleAfterMs] of [[longer, 120_000], [shorter, 50_000], [none, null]] as const) {
      await h.t.ds.query(
        `UPDATE tool_calls SET started_at = now() - interval '60 seconds', stale_after_ms = $2, duration_ms = NULL, finished_at = NULL, cost_cents = 0 WHERE id = $1`,
        [id, staleAfterMs],
      );
    }
    expect(await h.t.app.get(OrphanSweeperService).sweep()).toBe(2);
    expect(await statusOf(longer)).toEqual({ status: 'running', stale_after_ms: 120_000 });
    expect((await statusOf(shorter)).status).toBe('indeterminate');
    expect((await statusOf(none)).status).toBe('indeterminate');
  });

  it("a call the pipeline starts, and an approved call the approvals runner claims, carry this replica's VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS", async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const looked = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(looked.body.status, JSON.stringify(looked.body)).toBe('succeeded');
    expect(await statusOf(looked.body.toolCallId as string)).toEqual({ status: 'succeeded', stale_after_ms: OWN });

    // Waiting for its approval it never ran: none yet. Claimed once approved: this replica's.
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('2.00'));
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const toolCallId = posted.body.toolCallId as string;
    expect(await statusOf(toolCallId)).toEqual({ status: 'waiting_approval', stale_after_ms: null });
    const approval = await approvalFor(h, expert.key, toolCallId);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    const settled = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
    expect(settled.body.status, JSON.stringify(settled.body)).toBe('succeeded');
    expect(await statusOf(toolCallId)).toEqual({ status: 'succeeded', stale_after_ms: OWN });
  });
});
