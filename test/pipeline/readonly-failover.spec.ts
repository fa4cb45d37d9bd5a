import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { ToolCallLedger } from '../../src/tool-calls/tool-call-ledger.js';
import { aroundStatements } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * An HA failover: for a moment the gateway's connections reach a server that is read-only (the old primary
 * demoted, or a writer endpoint still resolving to a replica). PostgreSQL then refuses every write with
 * SQLSTATE 25006 "cannot execute UPDATE in a read-only transaction". Here the outcome statement of a call the
 * vendor already answered is run for real inside a READ ONLY transaction, so the error is PostgreSQL's own.
 */
describe('outcome write refused by a read-only server (failover)', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is answered 503 with the call named and the outcome kept (like any unavailable database), not 500 and lost', async () => {
    let readOnly = true;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (!readOnly || !text.includes('UPDATE tool_calls SET status = $2')) return send();
      const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await c.connect();
      try {
        await c.query('BEGIN READ ONLY');
        await c.query(text, params);
        throw new Error('unreachable');
      } finally {
        await c.query('ROLLBACK').catch(() => undefined);
        await c.end();
      }
    });
    let res;
    try {
      res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    } finally {
      readOnly = false;
    }
    const kept = h.t.app.get(ToolCallLedger).lateOutcomeWrites;
    undo();
    const [row] = (await h.t.ds.query(`SELECT status FROM tool_calls WHERE run_id = $1`, [org.runId])) as { status: string }[];
    // Not 500 INTERNAL with nothing kept and the row left running for the sweep to call indeterminate.
    expect({ status: res.status, code: res.body.code, kept, row: row.status }).toEqual({ status: 503, code: 'DATABASE_UNAVAILABLE', kept: 1, row: 'running' });
  }, 30_000);
});
