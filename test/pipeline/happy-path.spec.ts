import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerVerifierService } from '../../src/ledger/ledger-verifier.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { ALL_TEST_SECRETS } from '../support/secrets.js';
import { bearer } from '../support/test-app.js';

describe('the governed tool call: happy path (ADR walk-through)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('looks up an order end to end, redacts the ledger row and records the events in order', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', errorCode: null, replayed: false, truncated: false });
    expect(res.body.result).toMatchObject({ orderId: '12345', trackingNumbers: ['TRACK-001'] });
    expect(res.body.toolResult).toMatchObject({ type: 'tool_result', tool_use_id: use.id, is_error: false });
    expect(typeof res.body.toolResult.content).toBe('string');
    expect(JSON.parse(res.body.toolResult.content)).toEqual(res.body.result);

    const [row] = (await h.t.ds.query('SELECT * FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as Record<string, unknown>[];
    expect(row).toMatchObject({ status: 'succeeded', org_id: orgId, run_id: runId, tool_name: 'order_lookup', action: 'lookup', risk_level: 'low' });
    expect(row.input_redacted).toEqual({ orderId: '12345' });
    const out = JSON.stringify(row.output_redacted);
    const email = (res.body.result as { customer: { email: string } }).customer.email;
    const phone = (res.body.result as { customer: { phone: string } }).customer.phone;
    expect(email).toContain('@');
    expect(out).not.toContain(email);
    expect(out).not.toContain(phone);
    expect(out).toContain('TRACK-001');
    expect(row.policy_decision_id).toBeTruthy();
    expect(row.action_digest).toMatch(/^[0-9a-f]{64}$/);

    const events = (await h.t.ds.query('SELECT type, actor, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [
      res.body.toolCallId,
    ])) as { type: string; actor: unknown; metadata: Record<string, unknown> }[];
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.succeeded']);
    // Every event of the call names the agent key that posted it (API.md §9), the outcome's too.
    const [agent] = (await h.t.ds.query("SELECT id FROM api_keys WHERE org_id = $1 AND role = 'agent'", [orgId])) as { id: string }[];
    expect(events.map((e) => e.actor)).toEqual(events.map(() => ({ keyId: agent.id, role: 'agent' })));
    expect(events[2].metadata).toMatchObject({ toolName: 'order_lookup', action: 'lookup', errorCode: null });
    expect(JSON.stringify(events)).not.toContain(email);

    const decisions = (await h.t.ds.query('SELECT decision, risk_level, rule_id FROM policy_decisions WHERE tool_call_id = $1', [res.body.toolCallId])) as unknown[];
    expect(decisions).toEqual([{ decision: 'allow', risk_level: 'low', rule_id: null }]);
    expect(h.emu.count({ vendor: 'shopify' })).toBeGreaterThanOrEqual(1);

    const verify = await h.t.app.get(LedgerVerifierService).verify(orgId);
    expect(verify.ok).toBe(true);
  });

  it('replays a duplicate without calling the vendor again, and answers the result by GET', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    const before = h.emu.count({ vendor: 'shopify' });
    const again = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toMatchObject({ toolCallId: first.body.toolCallId, status: 'succeeded', replayed: true });
    expect(again.body.result).toEqual(first.body.result);
    expect(h.emu.count({ vendor: 'shopify' })).toBe(before);
    const got = await h.t.http.get(`/v1/tool-calls/${first.body.toolCallId}/result`).set(bearer(agentKey));
    expect(got.status).toBe(200);
    expect(got.body.result).toEqual(first.body.result);
  });

  it('keeps every secret out of logs, ledger rows, events and responses', async () => {
    const rows = (await h.t.ds.query(
      `SELECT (SELECT coalesce(string_agg(row_to_json(t)::text, ''), '') FROM tool_calls t) ||
              (SELECT coalesce(string_agg(row_to_json(e)::text, ''), '') FROM runtime_ledger_events e) ||
              (SELECT coalesce(string_agg(row_to_json(p)::text, ''), '') FROM policy_decisions p) AS dump`,
    )) as [{ dump: string }];
    const logs = h.t.logs.join('');
    for (const secret of ALL_TEST_SECRETS) {
      expect(rows[0].dump).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
  });

  it('shows ops the idempotency key the client knows: the Idempotency-Key it sent, or the tool_use id (scoped to the run)', async () => {
    const { adminKey, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const implicit = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(implicit);
    const second = await h.t.http
      .post(`/v1/runs/${runId}/tool-calls`)
      .set(bearer(agentKey))
      .set('Idempotency-Key', 'review:7eb2e0eb')
      .send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    expect([first.status, second.status]).toEqual([200, 200]);
    const one = await h.t.http.get(`/v1/tool-calls/${first.body.toolCallId as string}`).set(bearer(adminKey));
    expect(one.body.idempotencyKey).toBe(implicit.id);
    const two = await h.t.http.get(`/v1/tool-calls/${second.body.toolCallId as string}`).set(bearer(adminKey));
    expect(two.body.idempotencyKey).toBe('review:7eb2e0eb');
    const listed = await h.t.http.get('/v1/tool-calls').query({ runId }).set(bearer(adminKey));
    expect((listed.body.items as { idempotencyKey: string }[]).map((i) => i.idempotencyKey).sort()).toEqual([implicit.id, 'review:7eb2e0eb'].sort());
  });
});
