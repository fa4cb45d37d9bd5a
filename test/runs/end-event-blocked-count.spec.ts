/**
 * The run.cancelled event records blockedCalls. It counted every call of the run waiting for approval, but the end's
 * batches reject only approvals not yet past their expiry (REJECT_ENDED_BATCH_SQL: expires_at > now); one that passed
 * its expiry while the end waited for the run's lock is left to the expiry sweep and ends APPROVAL_EXPIRED, not
 * blocked by the end, and the ledger's own account of the end disagreed with the calls' events (found by a reviewer
 * of run lifecycle races). It counts the approvals the batches pick now.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { refundUse } from '../approvals/support.js';
import { waitFor } from '../support/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('run end event vs an approval expiring while the end waits for the run', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('blockedCalls counts only the calls the end blocked', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('9.01'));
    expect(res.status).toBe(202);
    const callId = res.body.toolCallId as string;
    await h.t.ds.query(`UPDATE approval_requests SET expires_at = now() + interval '1500 milliseconds' WHERE tool_call_id = $1`, [callId]);

    // Something else holds the run a moment (an intent statement in flight takes it FOR KEY SHARE).
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM agent_runs WHERE id = $1 FOR KEY SHARE', [org.runId]);
      const cancel = h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({}).then((r) => r);
      await waitFor(
        async () => ((await h.t.ds.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%FROM agent_runs WHERE id = $1 FOR UPDATE%'`)) as unknown[]).length > 0,
        'the end waiting for the run',
      );
      await sleep(1_700); // the approval passes its expiry while the end waits
      await holder.query('COMMIT');
      expect((await cancel).status).toBe(200);
    } finally {
      await holder.end();
    }
    const [ev] = (await h.t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE run_id = $1 AND type = 'run.cancelled'`, [org.runId])) as { metadata: { blockedCalls: number } }[];
    const blockedByEnd = (await h.t.ds.query(
      `SELECT 1 FROM runtime_ledger_events WHERE run_id = $1 AND type = 'tool_call.blocked' AND metadata->>'errorCode' = 'RUN_NOT_ACTIVE'`,
      [org.runId],
    )) as unknown[];
    const [approval] = (await h.t.ds.query(`SELECT status FROM approval_requests WHERE tool_call_id = $1`, [callId])) as { status: string }[];
    // The overdue approval is left to the expiry sweep (still pending), and the end says it blocked nothing. Before: 1.
    expect({ approval: approval.status, blockedByEnd: blockedByEnd.length, blockedCalls: ev.metadata.blockedCalls }).toEqual({ approval: 'pending', blockedByEnd: 0, blockedCalls: 0 });
  }, 30_000);
});
