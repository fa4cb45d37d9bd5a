import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { refundUse } from './support.js';

/**
 * The raw (encrypted) params of a call that waits for approval live in
 * tool_call_inputs only until the call has run or been refused. A replica
 * that dies after claiming an approved call (approved → running committed,
 * nothing else) leaves it to the orphan sweep, then to ops' reconcile: neither
 * may leave the raw input behind.
 */
describe('an approved call settled by the orphan sweep or by reconcile keeps no raw input', () => {
  let h: Harness;
  let org: OrgSetup;
  let ops: string;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });

  const inputs = async (id: string) => ((await h.t.ds.query('SELECT 1 FROM tool_call_inputs WHERE tool_call_id = $1', [id])) as unknown[]).length;

  /** A refund waiting for approval, then the state the claim commits before its process dies. */
  async function claimedThenOrphaned(): Promise<string> {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('3.00'));
    expect(res.status).toBe(202);
    const id = res.body.toolCallId as string;
    expect(await inputs(id)).toBe(1);
    await h.t.ds.query(
      `WITH a AS (UPDATE approval_requests SET status = 'approved', decided_at = now() WHERE tool_call_id = $1 AND org_id = $2 AND status = 'pending' RETURNING tool_call_id)
       UPDATE tool_calls SET status = 'running', started_at = now() - interval '10 minutes', updated_at = now()
        WHERE id IN (SELECT tool_call_id FROM a) AND status = 'waiting_approval'`,
      [id, org.orgId],
    );
    return id;
  }

  it('the orphan sweep deletes the input of the call it marks indeterminate', async () => {
    const id = await claimedThenOrphaned();
    expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
    const [call] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [id])) as { status: string }[];
    expect(call.status).toBe('indeterminate');
    expect(await inputs(id)).toBe(0);
  });

  it('reconcile deletes the input of an indeterminate call that still has one (settled by an older version)', async () => {
    const id = await claimedThenOrphaned();
    await h.t.ds.query(`UPDATE tool_calls SET status = 'indeterminate', error_code = 'OUTCOME_UNKNOWN', finished_at = now() WHERE id = $1`, [id]);
    expect(await inputs(id)).toBe(1);
    const rec = await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops)).send({ status: 'failed', note: 'checked with Shopify: no refund' });
    expect(rec.status).toBe(200);
    expect(await inputs(id)).toBe(0);
  });
});
