import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements, connectionLost } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * The intent statement of a new call committed, then its answer was lost (the connection dropped after
 * COMMIT), or it failed before it ran. The request sends it again for a few seconds: a committed attempt
 * is found as the call's own row, so the call is recorded once and runs once — not left `running` with
 * nothing sent (409 to every resend, then `indeterminate` for a call that never reached the vendor).
 */
describe('a new call whose intent write meets a dropped connection', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_order.add_note'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Makes the next intent statement fail: after it ran (`committed`) or before. */
  function dropNextIntent(committed: boolean): () => void {
    let armed = true;
    return aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (!armed || !text.includes('INSERT INTO tool_calls')) return send();
      armed = false;
      if (committed) await send();
      throw connectionLost();
    });
  }

  it.each([
    ['after it committed (the answer lost)', true],
    ['before it ran', false],
  ])('%s: the call is recorded once, runs once and answers succeeded; a resend replays it', async (_label, committed) => {
    const note = `lost-intent ${committed ? 'after' : 'before'} ${Date.now()}`;
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note });
    const sent = () => h.emu.requests.filter((r) => r.body.includes(note)).length;
    const undo = dropNextIntent(committed);
    let res;
    try {
      res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    } finally {
      undo();
    }
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', replayed: false });
    expect(sent()).toBe(1);
    const rows = (await h.t.ds.query(`SELECT id, status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as { id: string; status: string }[];
    expect(rows).toEqual([{ id: res.body.toolCallId, status: 'succeeded' }]);
    const events = (await h.t.ds.query(`SELECT type FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq`, [res.body.toolCallId])) as { type: string }[];
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.succeeded']);
    const again = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(again.body).toMatchObject({ status: 'succeeded', replayed: true, toolCallId: res.body.toolCallId });
    expect(sent()).toBe(1);
  });
});
