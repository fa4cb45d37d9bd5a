import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { startHarness, type Harness, verifyLedger } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { refunds, waitingRefund } from './support.js';
import { stopSweep } from './backlog-seed.js';

/**
 * What the approver reviews (the approval row: tool, action, redacted input, digest; unchained columns) is bound to
 * what runs (the call row and its encrypted approved input): a row rewritten around the gateway (the amount of a
 * 40.00 refund shown as 1.00) is refused at the decision, not run by the runner, and reported by verify. The input is
 * not redacted again to compare: an approval pending across a deploy that redacts otherwise stays approvable.
 */
describe('approval bound to the call that runs', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    await stopSweep(h); // the runner's defence is driven by hand below
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = (orgId: string) => verifyLedger(h.t, orgId);
  const showAmount = (approvalId: string, amount: string) =>
    h.t.ds.query(`UPDATE approval_requests SET input_redacted = jsonb_set(input_redacted, '{amount}', to_jsonb($2::text)) WHERE id = $1`, [approvalId, amount]);
  /** Approved with the digest it was asked under: 200, and the refund runs, once. */
  async function approvedRuns(w: Awaited<ReturnType<typeof waitingRefund>>, before: number): Promise<void> {
    const decided = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    const settled = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=8000`).set(bearer(w.org.agentKey));
    expect(settled.body.status).toBe('succeeded');
    expect(refunds(h)).toBe(before + 1);
  }
  const callOf = async (id: string) =>
    ((await h.t.ds.query('SELECT status, error_code, error_text FROM tool_calls WHERE id = $1', [id])) as { status: string; error_code: string | null; error_text: string | null }[])[0];

  it('an approval whose shown input was rewritten is refused 409 ACTION_DIGEST_MISMATCH, nothing runs, and verify reports it', async () => {
    const waiting = await waitingRefund(h, '40.00');
    const { org, expert, toolCallId, approval } = waiting;
    const before = refunds(h);
    expect((await verify(org.orgId)).ok).toBe(true);
    await showAmount(approval.id, '1.00');
    const shown = await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key));
    expect(shown.body.inputRedacted.amount).toBe('1.00');
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key))
      .send({ decision: 'approve', actionDigest: shown.body.actionDigest as string });
    expect([decided.status, decided.body.code]).toEqual([409, 'ACTION_DIGEST_MISMATCH']);
    expect((await callOf(toolCallId)).status).toBe('waiting_approval');
    const v = await verify(org.orgId);
    expect(v.ok).toBe(false);
    expect(v.brokenAt?.reason).toContain('approval row shows another tool, action, input or action digest');
    // Put back, it is approved and runs as shown.
    await showAmount(approval.id, '40.00');
    expect((await verify(org.orgId)).ok).toBe(true);
    await approvedRuns(waiting, before);
  });

  it('an approval recorded by a release that redacted its input otherwise (both rows alike) is still approved, and runs', async () => {
    const waiting = await waitingRefund(h, '41.00');
    const { toolCallId } = waiting;
    const before = refunds(h);
    // As a release that did not yet redact a phone in a note left both rows: today's redaction would show it otherwise,
    // and a deploy must not make pending approvals unapprovable (the input is not redacted again to compare).
    for (const table of ['approval_requests', 'tool_calls']) {
      const col = table === 'tool_calls' ? 'id' : 'tool_call_id';
      await h.t.ds.query(`UPDATE ${table} SET input_redacted = input_redacted || '{"note": "call 415-555-2671"}'::jsonb WHERE ${col} = $1`, [toolCallId]);
    }
    await approvedRuns(waiting, before);
  });

  it('the runner does not send an approved call whose approval row shows another input (failed, not executed)', async () => {
    const { org, toolCallId, approval } = await waitingRefund(h, '42.00');
    const before = refunds(h);
    // Approved around the decision's check: the row rewritten after it (here, the decision itself written with SQL).
    await showAmount(approval.id, '1.00');
    await h.t.ds.query(`UPDATE approval_requests SET status = 'approved' WHERE id = $1`, [approval.id]);
    await h.t.ds.query(`UPDATE tool_calls SET status = 'approved' WHERE id = $1`, [toolCallId]);
    await h.t.app.get(ApprovedCallRunner).sweep();
    const call = await callOf(toolCallId);
    expect([call.status, call.error_code]).toEqual(['failed', 'EXECUTION_ERROR']);
    expect(call.error_text).toContain('not executed');
    expect(refunds(h)).toBe(before);
    expect((await verify(org.orgId)).ok).toBe(false);
  });
});
