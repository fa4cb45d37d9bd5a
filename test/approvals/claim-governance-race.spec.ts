/**
 * A kill switch answered 200 is in force for the claim of an approved call too, including a claim whose statement had
 * already begun (its snapshot older than the change) and was waiting — here on the call's row, as while a run end or a
 * concurrent decision holds it. Before, the claim read the flag from its snapshot, waited, then marked the call running
 * after the admin's 200: the vendor was called, and the ledger showed tool_call.started after feature_flag.changed
 * {to: false}. Now the flag PUT waits for the claim instead: either the call is blocked FEATURE_DISABLED, or it was
 * started before the flag changed (and then either sent before it, or stopped unsent by the refund's own check).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { governanceLocksSharedSql, LOCK_SQL } from '../../src/db/advisory-locks.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { waitsOnLock } from '../support/lock-waits.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { refundUse, refunds } from './support.js';

describe('approvals: the kill switch turned off while a claim waits on the call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the call is blocked FEATURE_DISABLED, or its tool_call.started comes before the feature_flag.changed', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const orderId = '450789469';
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('3.30', orderId));
    expect(posted.status, posted.text).toBe(202);
    const callId = posted.body.toolCallId as string;

    // Every vendor slot of the org taken: a sweep that finds the call approved defers it, no claim is made yet.
    const calls = h.t.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(org.orgId, 'shopify'); r; r = calls.leaseFor(org.orgId, 'shopify')) held.push(r);
    const releaseAll = () => held.splice(0).forEach((r) => r());
    // Approved as a decision would, without starting it.
    await h.t.ds.query(
      `WITH a AS (UPDATE approval_requests SET status = 'approved', decided_at = now() WHERE tool_call_id = $1 AND status = 'pending' RETURNING tool_call_id)
       UPDATE tool_calls SET status = 'approved', updated_at = clock_timestamp() WHERE id IN (SELECT tool_call_id FROM a)`,
      [callId],
    );
    const before = refunds(h, orderId);

    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    let put: Promise<{ status: number }> | undefined;
    let run: Promise<void> | undefined;
    let answeredBeforeRollback: boolean | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM tool_calls WHERE id = $1 FOR UPDATE', [callId]);
      releaseAll();
      // Our pick-up, or a periodic sweep's if it got there first (the runner then skips ours): either claim waits on the row.
      run = h.t.app.get(ApprovedCallRunner).run(callId);
      // (The claim's first 1 kB, which is what pg_stat_activity keeps: its `fair` CTE, on the call's org.)
      await waitFor(() => waitsOnLock(h.t.ds, `%WITH fair AS (${governanceLocksSharedSql('(SELECT t.org_id FROM tool_calls t WHERE t.id = $1)')}%`), 'the claim waiting on the call row');

      let answered = false;
      put = h.t.http
        .put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`)
        .set(adminAuth)
        .send({ enabled: false })
        .then((r) => {
          answered = true;
          return r;
        });
      // The change has either committed and answered, or waits on a lock (the claim's: the org's flag lock, which the
      // claim holds shared, or the flag row): no timing decides it.
      await waitFor(
        async () => answered || (await waitsOnLock(h.t.ds, LOCK_SQL)) || (await waitsOnLock(h.t.ds, '%INSERT INTO "feature_flags"%')),
        'the flag change answered or waiting',
      );
      answeredBeforeRollback = answered;
      await holder.query('ROLLBACK');
    } finally {
      releaseAll();
      await holder.end();
    }
    expect((await put).status).toBe(200);
    await run;
    const done = await h.t.http.get(`/v1/tool-calls/${callId}/result?waitMs=10000`).set(bearer(org.agentKey));
    const sent = refunds(h, orderId) - before;

    const events = (await h.t.ds.query(
      `SELECT type, seq::bigint::text AS seq FROM runtime_ledger_events
        WHERE org_id = $1 AND (tool_call_id = $2 AND type = 'tool_call.started' OR type = 'feature_flag.changed' AND metadata->>'to' = 'false')`,
      [org.orgId, callId],
    )) as { type: string; seq: string }[];
    const seqOf = (type: string) => events.find((e) => e.type === type)?.seq;
    const started = seqOf('tool_call.started');
    const changed = seqOf('feature_flag.changed');
    expect(changed).toBeDefined();
    const seen = { status: done.body.status, errorCode: done.body.errorCode, sent, startedBeforeChange: started !== undefined && BigInt(started) < BigInt(changed!) };
    if (seen.status === 'blocked') {
      expect(seen).toEqual({ status: 'blocked', errorCode: 'FEATURE_DISABLED', sent: 0, startedBeforeChange: false });
      expect(started).toBeUndefined();
    } else if (seen.status === 'failed') {
      // Started under the flag as it was, then stopped before its refund was sent: the change committed while it was on
      // its way (the refund handler reads the run and the flag again before sending: sendStanding).
      expect(seen).toEqual({ status: 'failed', errorCode: 'EXECUTION_ERROR', sent: 0, startedBeforeChange: true });
      expect(answeredBeforeRollback).toBe(false);
    } else {
      // Started: only under the flag as it was, the change (and its 200) after the claim committed.
      expect(seen).toEqual({ status: 'succeeded', errorCode: null, sent: 1, startedBeforeChange: true });
      expect(answeredBeforeRollback).toBe(false);
    }
  });
});
