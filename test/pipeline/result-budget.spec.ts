import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { ResultsStore } from '../../src/tool-calls/results.store.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

describe('result budget', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ RESULT_BUDGET_BYTES: '400' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('truncates the model-facing content and keeps the full result retrievable', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect(res.body).toMatchObject({ status: 'succeeded', truncated: true, result: null });
    expect(Buffer.byteLength(res.body.toolResult.content)).toBeLessThanOrEqual(400);
    expect(res.body.toolResult.content).toContain(`/v1/tool-calls/${res.body.toolCallId}/result`);
    expect(res.body.toolResult.content).not.toContain('\uFFFD');
    const [row] = (await h.t.ds.query('SELECT truncated FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { truncated: boolean }[];
    expect(row.truncated).toBe(true);

    const full = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId}/result`).set(bearer(agentKey));
    expect(full.status).toBe(200);
    // The whole result; the model-facing content within the budget all the same (an agent passes the toolResult of a
    // long-poll on to the model, as it does the call's own answer).
    expect(full.body.result).toMatchObject({ orderId: '12345', trackingNumbers: ['TRACK-001'] });
    expect(full.body.truncated).toBe(true);
    expect(full.body.toolResult.content).toBe(res.body.toolResult.content);

    const replay = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect(replay.body).toMatchObject({ replayed: true, truncated: true });
  });

  it('purges results past the result TTL; the ledger row stays and says the result is gone', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    const store = h.t.app.get(ResultsStore);
    expect(await store.purgeExpired(new Date())).toBe(0);
    const later = new Date(Date.now() + (Number(h.t.config.RESULT_TTL_SECONDS) + 1) * 1000);
    expect(await store.purgeExpired(later)).toBeGreaterThanOrEqual(1);
    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_results WHERE tool_call_id = $1', [res.body.toolCallId])) as [{ n: number }];
    expect(n).toBe(0);
    const got = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId}/result`).set(bearer(agentKey));
    expect(got.body).toMatchObject({ status: 'succeeded', result: null });
    expect(got.body.toolResult.content).toMatch(/no longer stored/);
  });

  it('purges in batches until none is left (one DELETE of a large backlog could outlast the statement timeout every time)', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      ids.push(res.body.toolCallId as string);
    }
    const store = h.t.app.get(ResultsStore);
    const sql = h.t.app.get(Sql);
    const spy = vi.spyOn(sql, 'query');
    try {
      const later = new Date(Date.now() + (Number(h.t.config.RESULT_TTL_SECONDS) + 1) * 1000);
      expect(await store.purgeExpired(later, 2)).toBeGreaterThanOrEqual(5);
      expect(spy.mock.calls.filter(([text]) => /DELETE FROM tool_call_results/.test(String(text))).length).toBeGreaterThanOrEqual(3);
    } finally {
      spy.mockRestore();
    }
    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_results WHERE tool_call_id = ANY($1::uuid[])', [ids])) as [{ n: number }];
    expect(n).toBe(0);
  });

  it('a stored result no loaded master key opens: the replay and GET …/result still answer the call as succeeded (not 500), and say the result cannot be read', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect(first.body.status).toBe('succeeded');
    // As after a master key was removed while a result sealed under it was still within its TTL.
    await h.t.ds.query(`UPDATE tool_call_results SET key_id = 'k-removed' WHERE tool_call_id = $1`, [first.body.toolCallId]);
    const replay = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    const got = await h.t.http.get(`/v1/tool-calls/${first.body.toolCallId}/result`).set(bearer(agentKey));
    for (const res of [replay, got]) {
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'succeeded', result: null, toolResult: { is_error: false } });
      expect(res.body.toolResult.content).toMatch(/cannot be read/);
    }
    expect(replay.body.replayed).toBe(true);
  });
});
