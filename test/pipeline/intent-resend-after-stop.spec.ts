/**
 * A call's intent statement commits, its answer is lost (the database blips: pg's query_timeout), and the kill switch
 * (or the run's end) is answered 200 before the resend. The resend found its own row (`mine`) and answered 'reserved'
 * without looking at the run or the flag it had read: the call was sent to the vendor after the 200. Now it is
 * recorded failed EXECUTION_ERROR, not sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { STOPPED_WHILE_RECORDED_TEXT } from '../../src/tool-calls/tool-calls.service.js';

describe('a new call: intent answer lost, then the kill switch or the run end, then the intent resend', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  async function lostIntentThen(change: () => Promise<{ status: number }>, note: string) {
    const sql = h.t.app.get(Sql);
    const original = sql.prepared.bind(sql);
    let answeredAt = 0;
    let armed = true;
    (sql as { prepared: typeof sql.prepared }).prepared = (async (text: string, params: unknown[] = []) => {
      const rows = await original(text, params);
      if (armed && text.includes('INSERT INTO tool_calls') && JSON.stringify(params).includes(note)) {
        armed = false;
        const res = await change();
        answeredAt = Date.now();
        expect(res.status).toBe(200);
        throw Object.assign(new Error('Query read timeout'), {});
      }
      return rows;
    }) as typeof sql.prepared;
    try {
      return { res: await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
        .send(toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note })), answeredAt: () => answeredAt };
    } finally {
      (sql as { prepared: unknown }).prepared = original;
    }
  }
  let org: Awaited<ReturnType<typeof setupOrg>>;
  const noteSends = (note: string) => h.emu.requests.filter((r) => /orderUpdate/.test(r.body) && r.body.includes(note));

  it('tool_calling_enabled=false answered 200 before the resend: nothing is sent', async () => {
    org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const { res, answeredAt } = await lostIntentThen(
      () => h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false }),
      'intent-lost-1',
    );
    const late = noteSends('intent-lost-1').filter((r) => r.receivedAt > answeredAt());
    expect({ late: late.length, status: res.status, body: res.body.status, errorCode: res.body.errorCode }).toEqual({ late: 0, status: 200, body: 'failed', errorCode: 'EXECUTION_ERROR' });
    const [row] = (await h.t.ds.query('SELECT error_text, started_at IS NOT NULL AS started FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { error_text: string }[];
    expect(row.error_text).toBe(STOPPED_WHILE_RECORDED_TEXT);
  }, 30_000);

  it('run cancel answered 200 before the resend: nothing is sent', async () => {
    org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const { res, answeredAt } = await lostIntentThen(
      () => h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({}),
      'intent-lost-2',
    );
    const late = noteSends('intent-lost-2').filter((r) => r.receivedAt > answeredAt());
    expect({ late: late.length, status: res.status, body: res.body.status, errorCode: res.body.errorCode }).toEqual({ late: 0, status: 200, body: 'failed', errorCode: 'EXECUTION_ERROR' });
    const [row] = (await h.t.ds.query('SELECT error_text, started_at IS NOT NULL AS started FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { error_text: string }[];
    expect(row.error_text).toBe(STOPPED_WHILE_RECORDED_TEXT);
  }, 30_000);
});
