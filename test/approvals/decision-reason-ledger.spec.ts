import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { settleApprovalsSql as previousReleaseSettle } from './fixtures/previous-release-settle.sql.js';
import { waitingRefund } from './support.js';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

interface LedgerEvent {
  type: string;
  metadata: Record<string, unknown>;
}

/**
 * An expert's decision reason is the evidence of why a refund was let through or refused, as a reconcile note is the
 * operator's: it stays on the approval row (free text off the append-only ledger), the decision event records its
 * SHA-256 (`reasonDigest`, null when none was given), and verify finds the row's reason rewritten. Decisions written
 * before the digest was recorded (no `reasonDigest` key) are not compared: no false break on an existing ledger.
 */
describe('the decision reason on the ledger: reasonDigest, checked by verify', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = async (orgId: string) =>
    (await h.t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as { ok: boolean; brokenAt?: { eventId: string | null; reason: string } };

  /** The decision event of the approval (the one naming it), with its id. */
  async function decisionEvent(org: OrgSetup, approvalId: string): Promise<LedgerEvent & { id: string }> {
    const events = await h.t.http.get(`/v1/ledger/events?runId=${org.runId}`).set(bearer(org.adminKey));
    expect(events.status).toBe(200);
    const found = (events.body.items as (LedgerEvent & { id: string })[]).find((e) => e.metadata?.approvalId === approvalId);
    if (!found) throw new Error(`no event names approval ${approvalId}: ${JSON.stringify(events.body)}`);
    return found;
  }

  const setReason = (approvalId: string, reason: string | null) => h.t.ds.query('UPDATE approval_requests SET decision_reason = $2 WHERE id = $1', [approvalId, reason]);

  it('a rejection records the SHA-256 of its reason (not the text); a rewritten or deleted reason is a break at that event', async () => {
    const { org, expert, toolCallId, approval } = await waitingRefund(h, '3.00');
    const reason = 'déjà remboursé en magasin (customer already refunded in store)';
    const rej = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: approval.actionDigest, reason });
    expect([rej.status, rej.body.decisionReason]).toEqual([200, reason]);

    const event = await decisionEvent(org, approval.id);
    // Soft: verify is checked below whether or not the event records it.
    expect.soft(event).toMatchObject({ type: 'tool_call.blocked', metadata: { decision: 'rejected', errorCode: 'EXPERT_REJECTED', reasonDigest: sha256(reason) } });
    expect(JSON.stringify(event)).not.toContain('remboursé');
    expect(await verify(org.orgId)).toMatchObject({ ok: true });

    const broken = { ok: false, brokenAt: { eventId: event.id, reason: `tool call ${toolCallId}: its approval's decision reason differs from the one its event recorded` } };
    await setReason(approval.id, 'approved by mistake, refund it');
    expect(await verify(org.orgId)).toMatchObject(broken);
    await setReason(approval.id, null);
    expect(await verify(org.orgId)).toMatchObject(broken);
    await setReason(approval.id, reason);
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
  });

  it('an approval decided without a reason records reasonDigest null and verifies ok; a reason added afterwards is a break', async () => {
    const { org, expert, toolCallId, approval } = await waitingRefund(h, '4.00');
    const ok = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect([ok.status, ok.body.decisionReason]).toEqual([200, null]);
    const settled = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
    expect(settled.body.status).toBe('succeeded');

    const event = await decisionEvent(org, approval.id);
    expect(event.type).toBe('tool_call.approved');
    expect.soft(event.metadata).toHaveProperty('reasonDigest', null);
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    await setReason(approval.id, 'checked with the customer');
    expect(await verify(org.orgId)).toMatchObject({ ok: false, brokenAt: { eventId: event.id, reason: expect.stringMatching(/decision reason differs/) } });
  });

  it('an expiry stores no reason and records reasonDigest null: ok, and a reason put on the expired approval is a break', async () => {
    const { org, expert, approval } = await waitingRefund(h, '5.00');
    await h.t.ds.query(`UPDATE approval_requests SET expires_at = now() - interval '1 minute' WHERE id = $1`, [approval.id]);
    // A late decision finds it expired: the settle statement expires it, the reason given is not kept.
    const late = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest, reason: 'too late' });
    expect([late.status, late.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
    const [row] = (await h.t.ds.query('SELECT status, decision_reason FROM approval_requests WHERE id = $1', [approval.id])) as unknown[];
    expect(row).toEqual({ status: 'expired', decision_reason: null });

    const event = await decisionEvent(org, approval.id);
    expect(event).toMatchObject({ type: 'tool_call.blocked', metadata: { decision: 'expired', errorCode: 'APPROVAL_EXPIRED' } });
    expect(event.metadata).toHaveProperty('reasonDigest', null);
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    await setReason(approval.id, 'rejected on the phone');
    expect(await verify(org.orgId)).toMatchObject({ ok: false, brokenAt: { eventId: event.id } });
  });

  it('the sweep\'s expiry records reasonDigest null too, and verifies ok', async () => {
    const { org, approval } = await waitingRefund(h, '5.50');
    await h.t.ds.query(`UPDATE approval_requests SET expires_at = now() - interval '1 minute' WHERE id = $1`, [approval.id]);
    await h.t.app.get(ApprovedCallRunner).sweep();
    const event = await decisionEvent(org, approval.id);
    expect(event.metadata).toMatchObject({ decision: 'expired', reasonDigest: null });
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
  });

  it('a decision written by the previous release (no reasonDigest key) verifies ok, its reason not compared', async () => {
    const { org, approval } = await waitingRefund(h, '6.00');
    const [{ id: expertKeyId }] = (await h.t.ds.query(`SELECT id FROM api_keys WHERE org_id = $1 AND role = 'expert'`, [org.orgId])) as { id: string }[];
    const settled = (await h.t.ds.query(previousReleaseSettle('by-id'), [approval.id, 'rejected', new Date(), expertKeyId, 'expert', 'not this customer'])) as unknown[];
    expect(settled).toHaveLength(1);

    const event = await decisionEvent(org, approval.id);
    expect(event.metadata).toMatchObject({ decision: 'rejected', errorCode: 'EXPERT_REJECTED' });
    expect(event.metadata).not.toHaveProperty('reasonDigest');
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    await setReason(approval.id, 'rewritten: nothing recorded to compare it with');
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
  });

  it('a run end\'s rejection records the SHA-256 of the end\'s reason (kept on the approval); a rewritten one is a break', async () => {
    const { org, approval } = await waitingRefund(h, '7.00');
    const end = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'conversation closed' });
    expect([end.status, end.body.status]).toEqual([200, 'cancelled']);
    const [row] = (await h.t.ds.query('SELECT status, decision_reason FROM approval_requests WHERE id = $1', [approval.id])) as unknown[];
    expect(row).toEqual({ status: 'rejected', decision_reason: 'conversation closed' });

    const event = await decisionEvent(org, approval.id);
    expect(event.metadata).toMatchObject({ errorCode: 'RUN_NOT_ACTIVE', reason: 'run_ended', reasonDigest: sha256('conversation closed') });
    expect(JSON.stringify(event)).not.toContain('conversation closed');
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    await setReason(approval.id, 'ended by the customer');
    expect(await verify(org.orgId)).toMatchObject({ ok: false, brokenAt: { eventId: event.id } });
    await setReason(approval.id, 'conversation closed');
    expect(await verify(org.orgId)).toMatchObject({ ok: true });

    // Ended without a reason: none stored, and the digest null.
    const quiet = await waitingRefund(h, '8.00');
    expect((await h.t.http.post(`/v1/runs/${quiet.org.runId}/cancel`).set(bearer(quiet.org.adminKey)).send({})).status).toBe(200);
    expect((await decisionEvent(quiet.org, quiet.approval.id)).metadata).toMatchObject({ reasonDigest: null });
    expect(await verify(quiet.org.orgId)).toMatchObject({ ok: true });
  });
});
