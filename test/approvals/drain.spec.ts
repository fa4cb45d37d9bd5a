import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refunds, refundUse } from './support.js';

/**
 * A draining gateway starts no new vendor call: an approval decided during the
 * drain is recorded, and its call stays approved for another replica's sweep
 * (or this one's after the restart) — never cut off by the end of the grace period.
 */
describe('approvals while the gateway drains', () => {
  let h: Harness;
  let scratch: ScratchDatabase | undefined;
  // In a database of its own, as drain-claim.spec.ts: the call waits approved, and on the shared database another
  // gateway on it could take it meanwhile.
  beforeAll(async () => {
    scratch = await createScratchDatabase('tg_drain');
    h = await startHarness({ DATABASE_URL: scratch.url, APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
    await scratch?.drop(); // leak-scanned first: the run-wide scan never sees it
  });

  it('an approval decided after shutdown began is recorded, and its call waits, approved, without reaching the vendor', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('2.00'));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);
    const before = refunds(h);

    await h.t.app.get(ApprovedCallRunner).beforeApplicationShutdown(); // what app.close() runs before the HTTP drain
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    // The decision's own attempt runs behind its answer: wait until it has declined to start (or, were the drain
    // ignored, until the refund is at the vendor, which the checks below then catch).
    const notStarted = () => h.t.logs.some((l) => /approved call not (started|claimed): the gateway is stopping/.test(l) && l.includes(id));
    await waitFor(() => notStarted() || refunds(h) !== before, 'the decision’s attempt to be deferred by the drain');
    const [row] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [id])) as { status: string }[];
    expect(row.status).toBe('approved');
    expect(refunds(h)).toBe(before);
    // Not left approved: the run's end blocks it.
    expect((await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({})).status).toBe(200);
  });
});
