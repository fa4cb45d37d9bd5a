import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { aroundStatements, connectionLost } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { eventsOf, rowOf, waitFor } from './support.js';

/**
 * The orphan sweep marks a call `indeterminate` when it has been running longer
 * than VENDOR_TIMEOUT_MS plus the margin, guessing its process died. A live
 * process that kept the outcome (a database outage outlasting that) still
 * records what the vendor answered, as an event: the status stays for ops to
 * reconcile (terminal states change only that way, ARCHITECTURE.md "States").
 */
describe('an outcome that arrives after the orphan sweep gave up on the call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A lookup held at the vendor while the sweep, believing it an hour old, marks it indeterminate. */
  async function sweptWhileAtVendor(beforeAnswer?: (id: string) => Promise<void>) {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const seen = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
    h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'delay', delayMs: 800 });
    // then() sends the request now; the answer is awaited below.
    const sent = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
    await waitFor(() => h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) > seen);
    const [[row]] = (await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE run_id = $1 RETURNING id`, [org.runId])) as [{ id: string }[], number];
    expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
    expect((await rowOf(h, row.id)).status).toBe('indeterminate');
    await beforeAnswer?.(row.id);
    return { org, id: row.id, res: await sent };
  }

  it('keeps the sweep’s indeterminate and records what the vendor answered as an event for the reconcile', async () => {
    const { id, res } = await sweptWhileAtVendor();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ toolCallId: id, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect((await rowOf(h, id)).status).toBe('indeterminate');
    const events = await eventsOf(h, id);
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate', 'tool_call.outcome_after_sweep']);
    expect(events[3].metadata).toMatchObject({ toolName: 'order_lookup', action: 'lookup', status: 'succeeded', errorCode: null, vendorStatus: 200, reconciled: false });
    expect(events[3].metadata.durationMs).toEqual(expect.any(Number));
    // The vendor's answer came to the agent key's request: named as on the call's requested and started events;
    // the sweep's verdict is the gateway's own (no actor).
    expect(events[0].actor).toMatchObject({ role: 'agent', keyId: expect.any(String) });
    expect(events.map((e) => e.actor)).toEqual([events[0].actor, events[0].actor, null, events[0].actor]);
  });

  it('records the vendor’s answer once when the statement that recorded it loses its answer and is sent again', async () => {
    let undo = (): void => undefined;
    let lost = 0;
    try {
      const { id, res } = await sweptWhileAtVendor(async () => {
        undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
          if (lost > 0 || !text.includes('tool_call.outcome_after_sweep')) return send();
          lost++;
          await send(); // committed: the event is in the ledger
          throw connectionLost(); // and the answer never arrives
        });
      });
      expect(lost).toBe(1);
      // The same answer as when nothing was lost: the sweep's indeterminate.
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ toolCallId: id, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
      const events = await eventsOf(h, id);
      expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate', 'tool_call.outcome_after_sweep']);
      expect(events[3].metadata).toMatchObject({ status: 'succeeded', vendorStatus: 200, reconciled: false });
    } finally {
      undo();
    }
  });

  it('a call ops reconciled meanwhile keeps the reconcile, and the ledger still records what the vendor answered (the evidence for or against it)', async () => {
    const { org, id, res } = await sweptWhileAtVendor(async (callId) => {
      const ops = await createKey(h.t, (await rowOf(h, callId)).org_id as string, 'ops');
      const rec = await h.t.http.post(`/v1/tool-calls/${callId}/reconcile`).set(bearer(ops.key)).send({ status: 'failed', note: 'merchant says no order was looked up' });
      expect(rec.status, JSON.stringify(rec.body)).toBe(200);
    });
    expect(org.runId).toBeTruthy();
    expect(res.body).toMatchObject({ toolCallId: id, status: 'failed' });
    expect((await rowOf(h, id)).status).toBe('failed');
    const events = await eventsOf(h, id);
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate', 'tool_call.reconciled', 'tool_call.outcome_after_sweep']);
    expect(events[4].metadata).toMatchObject({ status: 'succeeded', vendorStatus: 200, reconciled: true });
  });
  it('keeps the late answer’s result: reconciled as succeeded on that event’s word, the call hands the agent what the vendor answered', async () => {
    const { org, id } = await sweptWhileAtVendor();
    const ops = await createKey(h.t, org.orgId, 'ops');
    // Not shown while the call is indeterminate: the model is told what it is told of any unknown outcome.
    const before = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect([before.body.status, before.body.result]).toEqual(['indeterminate', null]);
    const rec = await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops.key)).send({ status: 'succeeded', note: 'the ledger shows outcome_after_sweep succeeded' });
    expect(rec.status, JSON.stringify(rec.body)).toBe(200);
    const after = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect(after.body.status).toBe('succeeded');
    expect(after.body.result).toMatchObject({ orderId: '12345' });
    expect(after.body.toolResult.content).not.toMatch(/No result is available/);
  });

  // A call reconciled as failed can never hand out a result (failed is terminal, a second reconcile is 409): the
  // vendor's late, unredacted answer is not kept for it for the whole RESULT_TTL_SECONDS. A call reconciled as
  // succeeded whose late result is stored but unreadable says so, not that none reached the gateway.
  const stored = async (id: string) => ((await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_results WHERE tool_call_id = $1', [id])) as [{ n: number }])[0].n;

  it('reconciled as failed before the late answer: the late answer\'s unredacted result is not stored (no one can ever read it)', async () => {
    const { id, res } = await sweptWhileAtVendor(async (callId) => {
      const ops = await createKey(h.t, (await rowOf(h, callId)).org_id as string, 'ops');
      const rec = await h.t.http.post(`/v1/tool-calls/${callId}/reconcile`).set(bearer(ops.key)).send({ status: 'failed', note: 'merchant says nothing happened' });
      expect(rec.status).toBe(200);
    });
    expect(res.body.status).toBe('failed');
    expect(res.body.result).toBeNull();
    expect(await stored(id)).toBe(0);
  });

  it('reconciled as failed after the late answer: its stored result is dropped with the reconcile', async () => {
    const { org, id } = await sweptWhileAtVendor();
    expect(await stored(id)).toBe(1); // kept for a reconcile as succeeded
    const ops = await createKey(h.t, org.orgId, 'ops');
    const rec = await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops.key)).send({ status: 'failed', note: 'merchant says nothing happened' });
    expect(rec.status).toBe(200);
    const got = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect([got.body.status, got.body.result]).toEqual(['failed', null]);
    expect(await stored(id)).toBe(0);
  });

  it('reconciled as succeeded, its late result stored but unreadable: the agent is told it cannot be read now, not that none reached the gateway', async () => {
    const { org, id } = await sweptWhileAtVendor();
    const ops = await createKey(h.t, org.orgId, 'ops');
    const rec = await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops.key)).send({ status: 'succeeded', note: 'outcome_after_sweep says succeeded' });
    expect(rec.status).toBe(200);
    // damaged (or under a master key no longer loaded): the store answers { found: false, unreadable: true }
    await h.t.ds.query(`UPDATE tool_call_results SET auth_tag = decode('00000000000000000000000000000000', 'hex') WHERE tool_call_id = $1`, [id]);
    const got = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect(got.body.status).toBe('succeeded');
    expect(got.body.toolResult.content).not.toMatch(/did not reach the gateway in time, or is no longer stored/);
    expect(got.body.toolResult.content).toMatch(/stored but cannot be read/);
  });
});
