/**
 * A kill switch or a block rule answered 200 is in force for every call recorded after it, including a call whose
 * intent statement had already begun (its snapshot older than the change) and was waiting — here on a lock on its
 * run, as while RunsService.endRun holds the run and then rolls back to retry after a deadlock. Before, the statement
 * read the flag and the policy version from its snapshot and recorded the call `running` under rules no longer in
 * force, and the vendor was called after the admin's 200.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { ToolCallLedger } from '../../src/tool-calls/tool-call-ledger.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

describe('a governance change while a call is being recorded', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const addNote = (note: string) => toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note });
  const post = (org: OrgSetup, note: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote(note));

  /** Posts a call while its run row is locked, makes `change` once the intent waits on that lock, then lets it go. */
  async function callDuringChange(org: OrgSetup, note: string, change: () => Promise<number>) {
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM agent_runs WHERE id = $1 FOR UPDATE', [org.runId]);
      const pending = post(org, note).then((r) => r);
      await waitFor(
        async () =>
          ((await h.t.ds.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO tool_calls%' AND datname = current_database()`,
          )) as unknown[]).length > 0,
        'the intent statement waiting on its run',
      );
      expect(await change()).toBe(200);
      const from = h.emu.requests.length;
      await holder.query('ROLLBACK');
      const res = await pending;
      return { res, sent: h.emu.requests.slice(from).filter((r) => r.body.includes(note)).length };
    } finally {
      await holder.end();
    }
  }

  it('the flag turned off (200) while the intent waited: blocked FEATURE_DISABLED, nothing sent', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    expect((await post(org, 'warm-flag')).body.status).toBe('succeeded');
    const { res, sent } = await callDuringChange(org, 'after-flag-off', async () =>
      (await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false })).status,
    );
    expect({ status: res.body.status, errorCode: res.body.errorCode, sent }).toEqual({ status: 'blocked', errorCode: 'FEATURE_DISABLED', sent: 0 });
    const started = (await h.t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.started'`, [
      res.body.toolCallId,
    ])) as { n: number }[];
    expect(started[0].n).toBe(0);
  });

  it('a block rule saved (200) while the intent waited: blocked POLICY_BLOCKED by that rule, nothing sent', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules: [] });
    expect((await post(org, 'warm-policy')).body.status).toBe('succeeded');
    const { res, sent } = await callDuringChange(org, 'after-block-rule', async () =>
      (await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: [{ id: 'no-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'block' }] }))
        .status,
    );
    expect({ status: res.body.status, errorCode: res.body.errorCode, sent }).toEqual({ status: 'blocked', errorCode: 'POLICY_BLOCKED', sent: 0 });
    const [pd] = (await h.t.ds.query('SELECT rule_id FROM policy_decisions WHERE tool_call_id = $1', [res.body.toolCallId])) as { rule_id: string }[];
    expect(pd?.rule_id).toBe('no-notes');
  });

  it('governance that keeps changing on another replica while a call is decided: 409 CONFLICT with Retry-After (send it again), after deciding afresh', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    // The intent statement reports each time that the flag or policy the call was decided on is no longer the org's.
    const ledger = h.t.app.get(ToolCallLedger, { strict: false });
    const writeIntent = ledger.writeIntent.bind(ledger);
    let attempts = 0;
    ledger.writeIntent = async () => (attempts++, 'governance-changed');
    try {
      const res = await post(org, 'keeps-changing');
      expect([res.status, res.body.code, res.body.detail]).toEqual([409, 'CONFLICT', "the organization's flag or policy kept changing while this call was decided; send it again"]);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.body.retryAfterSeconds).toBe(1);
      expect(attempts).toBeGreaterThan(1); // decided again on fresh reads before giving up
    } finally {
      ledger.writeIntent = writeIntent;
    }
  });
});
