import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { rowOf, waitFor } from './support.js';

/**
 * A call ops settled as failed can never hand out a result (failed is terminal, a second reconcile is 409), yet the
 * vendor's full, unredacted answer that arrived late for it was stored (tool_call_results) and kept for the whole
 * RESULT_TTL_SECONDS, as was one stored before the reconcile: nobody could ever read it. And a call reconciled as
 * succeeded whose late result is stored but unreadable told the agent none had reached the gateway.
 */
describe('results of a call reconciled as failed', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function sweptWhileAtVendor(beforeAnswer?: (id: string) => Promise<void>) {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const seen = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
    h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'delay', delayMs: 800 });
    const sent = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
    await waitFor(() => h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) > seen);
    const [[row]] = (await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE run_id = $1 RETURNING id`, [org.runId])) as [{ id: string }[], number];
    expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
    await beforeAnswer?.(row.id);
    return { org, id: row.id, res: await sent };
  }
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
