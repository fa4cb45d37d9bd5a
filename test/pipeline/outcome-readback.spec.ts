import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { ToolCallLedger } from '../../src/tool-calls/tool-call-ledger.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * After a connection lost mid-write, the outcome statement may have committed
 * with its answer lost; the resend then finds the call settled. The read-back
 * (ToolCallLedger.holdsOutcome) tells our own outcome from one settled
 * elsewhere — the orphan sweep, which records no duration — on the real table.
 */
describe('the outcome read-back after a lost answer', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('recognises the outcome the row holds, and not another one', async () => {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.body.status).toBe('succeeded');
    const id = res.body.toolCallId as string;
    const [{ duration_ms: durationMs }] = (await h.t.ds.query('SELECT duration_ms FROM tool_calls WHERE id = $1', [id])) as { duration_ms: number }[];
    const ledger = h.t.app.get(ToolCallLedger);
    expect(await ledger.holdsOutcome({ id, status: 'succeeded', errorCode: null, durationMs })).toBe(true);
    expect(await ledger.holdsOutcome({ id, status: 'succeeded', errorCode: null, durationMs: durationMs + 1 })).toBe(false);
    expect(await ledger.holdsOutcome({ id, status: 'failed', errorCode: 'VENDOR_ERROR', durationMs })).toBe(false);
  });

  it('a call the orphan sweep settled is not taken for ours, even with the same status and code', async () => {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    const id = res.body.toolCallId as string;
    // As a process that died while the call ran leaves it, then the sweep.
    await h.t.ds.query(`UPDATE tool_calls SET status = 'running', duration_ms = NULL, started_at = now() - interval '10 minutes' WHERE id = $1`, [id]);
    await h.t.app.get(OrphanSweeperService).sweep();
    const [swept] = (await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE id = $1', [id])) as { status: string; error_code: string }[];
    expect(swept).toEqual({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN' });
    const ledger = h.t.app.get(ToolCallLedger);
    expect(await ledger.holdsOutcome({ id, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', durationMs: 15_000 })).toBe(false);
  });
});
