import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { ToolCallLedger } from '../../src/tool-calls/tool-call-ledger.js';
import { aroundStatements, connectionLost } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

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

  /**
   * Posts `use` while its first intent attempt outlives the client's wait: the server runs the statement (the row
   * inserted), pg's query_timeout answers the gateway first, and the commit comes only once the resend — its
   * snapshot taken before that commit — waits on the key the first attempt holds.
   */
  async function postWithIntentPastClientTimeout(use: ReturnType<typeof toolUse>) {
    const server = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await server.connect();
    const serverPid = ((await server.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[])[0].pid;
    let attempts = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (!text.includes('INSERT INTO tool_calls')) return send();
      if (++attempts === 1) {
        await server.query('BEGIN');
        await server.query(text, params);
        throw new Error('Query read timeout'); // pg's query_timeout: the client stops waiting, the server goes on
      }
      const answer = send();
      try {
        await waitFor(
          async () => ((await h.t.ds.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [serverPid])) as { n: number }[])[0].n > 0,
          'the resent intent to wait for the first attempt',
        );
      } finally {
        await server.query('COMMIT');
      }
      return answer;
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
      expect(attempts).toBe(2);
      return res;
    } finally {
      undo();
      await server.end();
    }
  }

  const typesOf = async (id: string) =>
    ((await h.t.ds.query(`SELECT type FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq`, [id])) as { type: string }[]).map((e) => e.type);

  it('still running on the server when the client gave up on it: the resend finds the call its own and runs it, once', async () => {
    const note = `lost-intent in flight ${Date.now()}`;
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note });
    const res = await postWithIntentPastClientTimeout(use);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', replayed: false });
    expect(h.emu.requests.filter((r) => r.body.includes(note)).length).toBe(1);
    const rows = (await h.t.ds.query(`SELECT id, status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as { id: string; status: string }[];
    expect(rows).toEqual([{ id: res.body.toolCallId, status: 'succeeded' }]);
    expect(await typesOf(res.body.toolCallId)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.succeeded']);
  });

  it('a refusal still running on the server when the client gave up on it: the resend answers the refusal, not 409', async () => {
    const res = await postWithIntentPastClientTimeout(toolUse('order_lookup', { action: 'lookupp', orderId: '1' }));
    expect(res.status, JSON.stringify(res.body)).toBe(403);
    expect(res.body).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST', replayed: false });
    expect(await typesOf(res.body.toolCallId)).toEqual(['tool_call.requested', 'tool_call.blocked']);
  });

  it('after it committed, the database down past the retries: 503 and nothing sent; once it is back the call is failed as not sent, not left running for the sweep', async () => {
    const note = `lost-intent outage ${Date.now()}`;
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note });
    const sent = () => h.emu.requests.filter((r) => r.body.includes(note)).length;
    const ask = () => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    let down = true;
    let committed = false;
    // The first intent statement commits and loses its answer; then every statement fails until `down` is cleared.
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (!down) return send();
      if (!committed && text.includes('INSERT INTO tool_calls')) {
        committed = true;
        await send();
      }
      throw connectionLost();
    });
    let res;
    try {
      res = await ask();
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('DATABASE_UNAVAILABLE');
      down = false;
      const row = await waitFor(async () => {
        const [r] = (await h.t.ds.query(`SELECT id, status, error_code, cost_cents, finished_at FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as {
          id: string; status: string; error_code: string | null; cost_cents: number; finished_at: Date | null;
        }[];
        return r?.status === 'running' ? undefined : r;
      }, 'the unsent call settled');
      expect(row).toMatchObject({ status: 'failed', error_code: 'EXECUTION_ERROR', cost_cents: 0 });
      expect(row.finished_at).not.toBeNull();
      const events = (await h.t.ds.query(`SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq`, [row.id])) as { type: string; metadata: { errorCode?: string } }[];
      expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.failed']);
      expect(events[2].metadata.errorCode).toBe('EXECUTION_ERROR');
      // A resend replays the settled answer: an error the agent can act on (send it under a new id), not a 409 in progress.
      const again = await ask();
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ toolCallId: row.id, status: 'failed', errorCode: 'EXECUTION_ERROR', replayed: true });
      expect(again.body.toolResult.is_error).toBe(true);
      expect(sent()).toBe(0);
    } finally {
      down = false;
      undo();
    }
  });

  it('before it ran, the database down past the retries: 503, no row, and nothing is written once it is back', async () => {
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '450789469' });
    let down = true;
    const undo = aroundStatements(h.t.app.get(Sql), async (_text, _params, send) => {
      if (down) throw connectionLost();
      return send();
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
      expect(res.status).toBe(503);
      down = false;
      // The background settle finds no row; after it has had its tries, the call is still unrecorded and runs when sent again.
      const ledger = h.t.app.get(ToolCallLedger) as unknown as { late: Set<Promise<void>> };
      await waitFor(() => ledger.late.size === 0 || undefined, 'the background settle done');
      const rows = (await h.t.ds.query(`SELECT 1 FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as unknown[];
      expect(rows).toHaveLength(0);
      const again = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ status: 'succeeded', replayed: false });
    } finally {
      down = false;
      undo();
    }
  });

  it.each([
    ['', false],
    [' (once, though its first write committed with the answer lost)', true],
  ])('an outage past the stale window, the sweep first (another replica): the call stays indeterminate, but the unsent settle takes back its charge%s', async (_label, loseSettleAnswer) => {
    const note = `lost-intent swept ${loseSettleAnswer ? 'lost ' : ''}${Date.now()}`;
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note });
    const sent = () => h.emu.requests.filter((r) => r.body.includes(note)).length;
    let down = true;
    let committed = false;
    let settleLost = !loseSettleAnswer;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (!down) {
        // The background settle's statement commits, its answer is lost, and the retry sends it again.
        if (settleLost || !text.includes('tool_call.outcome_after_sweep')) return send();
        settleLost = true;
        await send();
        throw connectionLost();
      }
      if (text.includes("SET status = 'indeterminate', error_code = 'OUTCOME_UNKNOWN'")) return send(); // the sweep, as on a replica that reaches the database
      if (!committed && text.includes('INSERT INTO tool_calls')) {
        committed = true;
        await send();
      }
      throw connectionLost();
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
      expect(res.status).toBe(503);
      await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '10 minutes' WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id]);
      expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
      const [swept] = (await h.t.ds.query(`SELECT cost_cents FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as { cost_cents: number }[];
      expect(swept.cost_cents).toBeGreaterThan(0); // what may have been sent is charged
      down = false;
      const ledger = h.t.app.get(ToolCallLedger) as unknown as { late: Set<Promise<void>> };
      await waitFor(() => ledger.late.size === 0 || undefined, 'the background settle done', 20_000);
      const [row] = (await h.t.ds.query(`SELECT id, status, cost_cents FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as {
        id: string; status: string; cost_cents: number;
      }[];
      // Terminal states change only by a reconcile; the charge was the sweep's guess, and the gateway knows better.
      expect(row).toMatchObject({ status: 'indeterminate', cost_cents: 0 });
      const events = (await h.t.ds.query(`SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq`, [row.id])) as { type: string; metadata: { errorCode?: string } }[];
      expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate', 'tool_call.outcome_after_sweep']);
      expect(events[3].metadata.errorCode).toBe('EXECUTION_ERROR');
      expect(settleLost).toBe(true);
      expect(sent()).toBe(0);
    } finally {
      down = false;
      undo();
    }
  });
});
