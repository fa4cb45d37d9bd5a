import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { aroundStatements, approvalFor, refundUse, refunds } from './support.js';

/** The decision's settle statement (settleApprovalsSql('by-id')). */
const isSettle = (text: string): boolean => text.includes('UPDATE approval_requests SET') && text.includes("id = $1 AND status = 'pending'");
/** ApprovalsService.load: the plain read of one approval (no FOR UPDATE). */
const isLoad = (text: string): boolean => /FROM approval_requests WHERE id = \$1\s*$/.test(text);

/**
 * POST /v1/approvals/:id/decision commits the decision (and starts the approved call), then reads the approval again
 * to answer it (ApprovalsService.decide: `return approvalView(await this.load(p, id, false), …)`). A database error on
 * that read — here a real statement_timeout behind a table lock another session took at that moment; equally a
 * full pool or a dropped connection — answers 503 DATABASE_UNAVAILABLE "retry later" for a decision that was
 * recorded and whose refund runs. The retry it invites can only get 409 APPROVAL_ALREADY_DECIDED.
 */
describe('a decision whose answer fails after it committed', () => {
  let h: Harness;
  let direct: pg.Client;
  beforeAll(async () => {
    // statement_timeout 1 s (DB_QUERY_TIMEOUT_MS 2 s): the server cancels the blocked read first (57014).
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', DB_QUERY_TIMEOUT_MS: '2000' });
    direct = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
  }, 90_000);
  afterAll(async () => {
    await direct?.end();
    await h?.close();
  });

  /** The decision, with the read after its commit blocked by another session's lock past the statement timeout. */
  async function decideWhileReadLocked(approvalId: string, key: string, body: object) {
    let settled = false;
    let locked = false;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (isSettle(text) && params[0] === approvalId) {
        const rows = await send();
        settled = true;
        return rows;
      }
      // The read after the commit: another session (a migration, a VACUUM FULL, an operator's LOCK) holds the table.
      if (settled && !locked && isLoad(text) && params[0] === approvalId) {
        locked = true;
        await direct.query('BEGIN');
        await direct.query('LOCK TABLE approval_requests IN ACCESS EXCLUSIVE MODE');
      }
      return send();
    });
    try {
      return await h.t.http.post(`/v1/approvals/${approvalId}/decision`).set(bearer(key)).send(body);
    } finally {
      undo();
      if (locked) await direct.query('ROLLBACK');
      expect(locked).toBe(true);
    }
  }

  it('is not answered 503 "retry later" once the approval is decided and its call runs', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('3.33'));
    expect(posted.status).toBe(202);
    const callId = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, callId);
    const before = refunds(h);

    const d = await decideWhileReadLocked(approval.id, expert.key, { decision: 'approve', actionDigest: approval.actionDigest });

    // What happened: the approval is approved, and its refund ran, once.
    const [row] = (await h.t.ds.query('SELECT status FROM approval_requests WHERE id = $1', [approval.id])) as { status: string }[];
    expect(row.status).toBe('approved');
    const result = await h.t.http.get(`/v1/tool-calls/${callId}/result?waitMs=10000`).set(bearer(org.agentKey));
    expect(result.body.status).toBe('succeeded');
    expect(refunds(h) - before).toBe(1);

    // The retry the answer asks for can only be refused: 409, "already approved".
    const retry = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect([retry.status, retry.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);

    // So the decision's own answer must say it was decided (200 approved), not 503 "database unavailable; retry later".
    expect([d.status, d.body.code ?? d.body.status]).toEqual([200, 'approved']);
    // As the settle wrote it: who decided, when, and the call approved (it ran after: the answer is of the decision).
    expect(d.body).toMatchObject({ id: approval.id, decidedBy: expert.id, decidedRole: 'expert', toolCallId: callId, toolCallStatus: 'approved', toolCallErrorCode: null });
    expect(Date.parse(d.body.decidedAt as string)).toBeGreaterThan(Date.now() - 60_000);
  }, 60_000);

  it('a rejection likewise: 200 rejected, its call blocked EXPERT_REJECTED, nothing sent', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.44'));
    const callId = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, callId);
    const before = refunds(h);
    const d = await decideWhileReadLocked(approval.id, expert.key, { decision: 'reject', actionDigest: approval.actionDigest, reason: 'not this one' });
    expect(d.status, JSON.stringify(d.body)).toBe(200);
    expect(d.body).toMatchObject({ status: 'rejected', decidedBy: expert.id, decidedRole: 'expert', decisionReason: 'not this one', toolCallStatus: 'blocked', toolCallErrorCode: 'EXPERT_REJECTED' });
    // The same as a read of it now says.
    const read = await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key));
    expect(d.body).toEqual(read.body);
    expect(refunds(h) - before).toBe(0);
  }, 60_000);
});
