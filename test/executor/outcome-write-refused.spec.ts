import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { rowOf } from './support.js';

/** An error as pg reports a server's refusal with this SQLSTATE. */
const pgError = (code: string, message: string): Error => Object.assign(new Error(message), { code, severity: 'ERROR' });
const isOutcome = (text: string): boolean => text.includes('WITH tc AS (UPDATE tool_calls SET status');
const isIntent = (text: string): boolean => text.includes('INSERT INTO tool_calls');

/**
 * The statement that records an executed call's outcome, refused by the database with something other than "database
 * unavailable" (statement-level fault review). A deadlock (40P01: the transaction rolled back whole, safe to run again)
 * was answered a bare 500 and lost the outcome the gateway held: the row stayed `running` until the orphan sweep made
 * it `indeterminate`, and the agent, told only "internal error", might send the call again under a new id. It is now
 * retried as a serialization failure is. An error retrying cannot help is answered with the call's id and
 * `outcomeConfirmed: false`, as an outage is.
 */
describe('an outcome write the database refuses', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Posts an add_note with the first statement matching `which` failing once with `err`. */
  async function postFailingOnce(which: (text: string) => boolean, err: () => Error) {
    const note = `note-${Date.now()}-${Math.random()}`;
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '12345', note });
    let failed = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (failed === 0 && which(text)) {
        failed++;
        throw err();
      }
      return send();
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
      return { res, use, failed, sent: h.emu.requests.filter((r) => r.body.includes(note)).length };
    } finally {
      undo();
    }
  }

  it('a deadlock on the outcome statement: written again, the call answered 200 and recorded succeeded, the vendor called once', async () => {
    const { res, use, failed, sent } = await postFailingOnce(isOutcome, () => pgError('40P01', 'deadlock detected'));
    expect(failed).toBe(1);
    expect(sent).toBe(1);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded' });
    expect((await rowOf(h, res.body.toolCallId as string)).status).toBe('succeeded');
    const again = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ toolCallId: res.body.toolCallId, status: 'succeeded' });
    expect(h.emu.requests.filter((r) => r.body.includes(use.input.note as string)).length).toBe(1);
  });

  it('a deadlock on the intent statement: written again, not a 500', async () => {
    const { res, failed, sent } = await postFailingOnce(isIntent, () => pgError('40P01', 'deadlock detected'));
    expect(failed).toBe(1);
    expect(res.status).toBe(200);
    expect(sent).toBe(1);
  });

  it('an error retrying cannot help: 500 naming the call, outcome not confirmed, never to be sent under a new id; logged once', async () => {
    const from = h.t.logs.length;
    const { res, use, failed, sent } = await postFailingOnce(isOutcome, () => pgError('23505', 'duplicate key value violates unique constraint "x"'));
    // One error line with the stack (the recorder's, naming the call), not a second "unhandled error" from the filter.
    const errors = h.t.logs.slice(from).filter((l) => (JSON.parse(l) as { level: number }).level >= 50 && !l.includes('"msg":"request errored"'));
    expect(errors.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['outcome not recorded: the write failed; the orphan sweep will mark the call indeterminate']);
    expect(failed).toBe(1);
    expect(sent).toBe(1);
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 'INTERNAL', outcomeConfirmed: false, toolCallId: expect.any(String) });
    expect(res.body.detail).toMatch(/the vendor was called, but its outcome could not be recorded.*never under a new id/);
    expect(JSON.stringify(res.body)).not.toContain('duplicate key'); // the database's own words stay in the log
    const [row] = (await h.t.ds.query('SELECT id, status FROM tool_calls WHERE org_id = $1 AND tool_use_id = $2', [org.orgId, use.id])) as { id: string; status: string }[];
    expect(row).toEqual({ id: res.body.toolCallId, status: 'running' }); // the orphan sweep settles it indeterminate
  });
});
