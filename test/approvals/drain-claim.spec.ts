import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { bearer, createKey } from '../support/test-app.js';
import { aroundStatements, approvalFor, isClaim, refundUse, refunds } from './support.js';

/** The runner's look-up of an approved call before it takes a vendor slot and claims it. */
const isPendingLookup = (text: string): boolean => text.includes('SELECT org_id, tool_name, action FROM tool_calls') && text.includes("status = 'approved'");

/**
 * Shutdown may begin while a run is between its look-up of the approved call and its claim (the
 * approver's request, or a sweep's page): that run must not claim the call and start a vendor call
 * during the drain either. The call stays approved for a live replica's sweep.
 */
describe('approvals: shutdown between the look-up and the claim', () => {
  let h: Harness;
  let scratch: ScratchDatabase | undefined;
  // In a database of its own: the call is left approved for "a live replica's sweep", and on the shared database
  // something else (another app or process on it) once claimed it meanwhile and failed it.
  beforeAll(async () => {
    scratch = await createScratchDatabase('tg_drain_claim');
    h = await startHarness({ DATABASE_URL: scratch.url, APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
    await scratch?.drop(); // leak-scanned first: the run-wide scan never sees it
  });

  it('the run does not claim the call: it stays approved and nothing reaches the vendor', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('2.20'));
    expect(res.status).toBe(202);
    const callId = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, callId);
    const before = refunds(h);
    const runner = h.t.app.get(ApprovedCallRunner);
    let lookedUp = false;
    let claims = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (isClaim(text) && params[0] === callId) claims++;
      const rows = await send();
      if (isPendingLookup(text) && params[0] === callId && !lookedUp) {
        lookedUp = true;
        void runner.beforeApplicationShutdown(); // what app.close() runs first: shutdown begins now
      }
      return rows;
    });
    try {
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect(decided.status).toBe(200);
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      undo();
    }
    expect(lookedUp).toBe(true);
    expect(claims).toBe(0);
    const [row] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [callId])) as { status: string }[];
    expect(row!.status).toBe('approved');
    expect(refunds(h)).toBe(before);
    // Not left approved for the next start-up pass: the run's end blocks it.
    expect((await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({})).status).toBe(200);
  });
});
