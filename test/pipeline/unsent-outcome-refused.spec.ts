import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { NOT_SENT_PLAIN_TEXT } from '../../src/tool-calls/outcome-recorder.js';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { aroundStatements } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, verifyLedger, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

const pgError = (code: string, message: string): Error => Object.assign(new Error(message), { code, severity: 'ERROR' });
const isOutcome = (text: string): boolean => text.includes('WITH tc AS (UPDATE tool_calls SET status');

/**
 * A call the gateway knows never reached its vendor (no credentials: CREDENTIALS_NOT_FOUND) whose outcome statement
 * the database refused with an error retrying cannot help. It was left running, and the orphan sweep made it
 * indeterminate ("may have run") and charged it the action's cost in the row, usage and the run's total, though the
 * client had been told "the vendor was not called". It is now recorded plainly: failed, not sent, not charged.
 */
describe('a call not sent whose outcome the database refused', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is recorded failed with its code from the gateway’s own values, never charged nor swept; its replay says so', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], vendors: [] });
    const ops = (await createKey(h.t, org.orgId, 'ops')).key;
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'never sent' });
    const seen = h.emu.requests.length;
    let refused = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (refused === 0 && isOutcome(text)) {
        refused++;
        throw pgError('23505', 'duplicate key value violates unique constraint "x"');
      }
      return send();
    });
    let res;
    try {
      res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    } finally {
      undo();
    }
    expect(refused).toBe(1);
    expect(res.status).toBe(500);
    expect(res.body.detail).toMatch(/the vendor was not called\) could not be recorded as it was; it is recorded as failed, not sent/);
    const id = res.body.toolCallId as string;
    expect(h.emu.requests.length).toBe(seen);
    const row = async () =>
      ((await h.t.ds.query('SELECT status, error_code, error_text, cost_cents FROM tool_calls WHERE id = $1', [id])) as { status: string; error_code: string; error_text: string; cost_cents: number }[])[0];
    await waitFor(async () => (await row()).status !== 'running', 'the plain outcome recorded');
    expect(await row()).toEqual({ status: 'failed', error_code: 'CREDENTIALS_NOT_FOUND', error_text: NOT_SENT_PLAIN_TEXT, cost_cents: 0 });
    // Past the vendor timeout, the sweep finds nothing of it to settle.
    await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE id = $1`, [id]);
    await h.t.app.get(OrphanSweeperService).sweep();
    expect((await row()).status).toBe('failed');
    const usage = await h.t.http.get(`/v1/orgs/${org.orgId}/usage`).set(bearer(ops));
    expect(usage.body.byTool[0]).toMatchObject({ calls: 1, failed: 1, costCents: 0 });
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body.totalCostCents).toBe(0);
    const replay = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(replay.body).toMatchObject({ toolCallId: id, status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND', replayed: true });
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });
  });
});
