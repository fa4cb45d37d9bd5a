import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

describe('the governed tool call: every way it can end', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });
  const post = (runId: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
    h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(key)).set(headers).send(body as object);
  /** The one request log line ("request completed" / "request errored") of the answer that echoed `res`'s correlation id. */
  const requestLineOf = async (res: { headers: Record<string, string> }): Promise<Record<string, unknown>> => {
    await new Promise((r) => setTimeout(r, 100)); // written on 'finish'
    const cid = res.headers['x-correlation-id'];
    const lines = h.t.logs
      .flatMap((c) => c.split('\n'))
      .filter((l) => l.includes(cid))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.correlationId === cid && /^request /.test(String(l.msg)));
    expect(lines).toHaveLength(1);
    return lines[0];
  };
  const eventsOf = async (id: string) =>
    ((await h.t.ds.query('SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [id])) as {
      type: string;
      metadata: Record<string, unknown>;
    }[]);

  it('flag off → 403 FEATURE_DISABLED, row blocked, event reason feature_disabled, no vendor call', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'], flag: false });
    const before = h.emu.count();
    const res = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ status: 'blocked', errorCode: 'FEATURE_DISABLED', toolResult: { is_error: true } });
    const [row] = (await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as unknown[];
    expect(row).toEqual({ status: 'blocked', error_code: 'FEATURE_DISABLED' });
    const events = await eventsOf(res.body.toolCallId);
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.blocked']);
    expect(events[1].metadata.reason).toBe('feature_disabled');
    expect(h.emu.count()).toBe(before);
  });

  it('tool not in the manifest (or not in the catalog) → 403 NOT_IN_MANIFEST', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const other = await post(runId, agentKey, toolUse('shopify_query', { action: 'get_product', productId: '1' }));
    expect(other.status).toBe(403);
    expect(other.body.errorCode).toBe('NOT_IN_MANIFEST');
    const unknown = await post(runId, agentKey, toolUse('no_such_tool', { action: 'x' }));
    expect(unknown.status).toBe(403);
    expect(unknown.body.errorCode).toBe('NOT_IN_MANIFEST');
    // The model reads which actions of the tool it may use, and nothing it wrote is echoed.
    expect(other.body.toolResult.content).toBe("This tool or action is not available in this run (this tool is not in this run; a run's tools are fixed when it starts, so a tool permitted since needs a new run). The action was not executed.");
    const typo = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookupp', orderId: '1' }));
    expect(typo.status).toBe(403);
    expect(typo.body.toolResult.content).toContain('(this run allows only these actions of this tool: lookup)');
    const [row] = (await h.t.ds.query('SELECT error_code, error_text FROM tool_calls WHERE id = $1', [typo.body.toolCallId])) as unknown[];
    expect(row).toEqual({ error_code: 'NOT_IN_MANIFEST', error_text: 'this run allows only these actions of this tool: lookup' });
    // A replay answers exactly as the first call did.
    const again = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookupp', orderId: '1' }, typo.body.toolResult.tool_use_id));
    expect(again.body).toMatchObject({ replayed: true, toolResult: typo.body.toolResult });
  });

  it('a tool of the run without a string `action` → 422 INVALID_INPUT listing its actions (the tool schema requires one)', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'order_lookup.lookup'] });
    const before = h.emu.count();
    const noAction = await post(runId, agentKey, toolUse('order_lookup', { orderId: '1' }));
    expect(noAction.status).toBe(422);
    expect(noAction.body).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT', toolResult: { is_error: true } });
    expect(noAction.body.toolResult.content).toBe('The tool input is invalid (action: is required (one of: lookup)). Fix the input and try again.');
    const numeric = await post(runId, agentKey, toolUse('order_lookup', { action: 7, orderId: '1' }));
    expect(numeric.status).toBe(422);
    expect(numeric.body.toolResult.content).toContain('(action: must be one of: lookup)');
    const [row] = (await h.t.ds.query('SELECT status, error_code, error_text, action, vendor FROM tool_calls WHERE id = $1', [noAction.body.toolCallId])) as unknown[];
    expect(row).toEqual({ status: 'failed', error_code: 'INVALID_INPUT', error_text: 'action: is required (one of: lookup)', action: '', vendor: null });
    // A tool that is not in the run stays NOT_IN_MANIFEST whatever its input.
    const notInRun = await post(runId, agentKey, toolUse('shopify_query', { productId: '1' }));
    expect(notInRun.status).toBe(403);
    expect(notInRun.body.errorCode).toBe('NOT_IN_MANIFEST');
    expect(h.emu.count()).toBe(before);
  });

  it('bad params → 422 INVALID_INPUT naming the field, recorded as failed', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const missing = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup' }));
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT' });
    expect(missing.body.toolResult.content).toContain('orderId');
    const wrong = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: 'abc; DROP TABLE' }));
    expect(wrong.status).toBe(422);
    expect(wrong.body.toolResult.content).toContain('orderId');
    const extra = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '1', evil: true }));
    expect(extra.status).toBe(422);
    expect(extra.body.toolResult.content).toContain('evil');
  });

  it('policy block → 403 POLICY_BLOCKED with the rule recorded', async () => {
    const rules = [{ id: 'no-lookups', match: { toolName: 'order_lookup.*' }, decision: 'block', reason: 'not today' }];
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules });
    const res = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(403);
    expect(res.body.errorCode).toBe('POLICY_BLOCKED');
    const [pd] = (await h.t.ds.query('SELECT decision, rule_id, reason FROM policy_decisions WHERE tool_call_id = $1', [res.body.toolCallId])) as unknown[];
    expect(pd).toEqual({ decision: 'block', rule_id: 'no-lookups', reason: 'not today' });
  });

  it("a tool-call answer's request line names its call and its errorCode (403 POLICY_BLOCKED apart from FORBIDDEN, 422, a 200 failed, a replay, GET …/result)", async () => {
    const rules = [{ id: 'no-refunds', match: { toolName: 'shopify_refund.*' }, decision: 'block', reason: 'not today' }];
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'], rules });
    const tag = randomUUID();
    const blocked = await post(runId, agentKey, toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }), { 'X-Correlation-Id': `blocked-${tag}` });
    expect([blocked.status, blocked.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    expect(await requestLineOf(blocked)).toMatchObject({ res: { statusCode: 403 }, code: 'POLICY_BLOCKED', toolCallId: blocked.body.toolCallId, orgId });
    const invalid = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup' }), { 'X-Correlation-Id': `invalid-${tag}` });
    expect([invalid.status, invalid.body.errorCode]).toEqual([422, 'INVALID_INPUT']);
    expect(await requestLineOf(invalid)).toMatchObject({ res: { statusCode: 422 }, code: 'INVALID_INPUT', toolCallId: invalid.body.toolCallId });
    // A tool result is a 200 whatever it is: the line tells a vendor failure from a success.
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, body: { errors: 'down' }, times: Infinity });
    try {
      const failed = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
      expect([failed.status, failed.body.errorCode]).toEqual([200, 'VENDOR_ERROR']);
      expect(await requestLineOf(failed)).toMatchObject({ res: { statusCode: 200 }, code: 'VENDOR_ERROR', toolCallId: failed.body.toolCallId });
    } finally {
      h.emu.clearFaults();
    }
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await post(runId, agentKey, use);
    expect(first.body.status).toBe('succeeded');
    const firstLine = await requestLineOf(first);
    expect(firstLine).toMatchObject({ toolCallId: first.body.toolCallId });
    expect(firstLine).not.toHaveProperty('code');
    // A replay is answered under a correlation id no ledger row holds: its line names the call it replayed.
    const again = await post(runId, agentKey, use, { 'X-Correlation-Id': `replay-${tag}` });
    expect([again.status, again.body.replayed]).toEqual([200, true]);
    expect(await requestLineOf(again)).toMatchObject({ toolCallId: first.body.toolCallId });
    const read = await h.t.http.get(`/v1/tool-calls/${blocked.body.toolCallId}/result`).set(bearer(agentKey));
    expect(read.status).toBe(200); // the body whatever the status
    expect(await requestLineOf(read)).toMatchObject({ res: { statusCode: 200 }, code: 'POLICY_BLOCKED', toolCallId: blocked.body.toolCallId });
  });

  it('high risk → 202 waiting_approval with an ApprovalRequest, the run waiting', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const before = h.emu.count({ vendor: 'shopify' });
    const res = await post(runId, agentKey, toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '10.00' }));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'waiting_approval', errorCode: null, toolResult: { is_error: false } });
    expect(res.body.toolResult.content).toMatch(/approval/);
    const [ap] = (await h.t.ds.query('SELECT kind, status, risk_level, action_digest FROM approval_requests WHERE tool_call_id = $1', [
      res.body.toolCallId,
    ])) as Record<string, unknown>[];
    expect(ap).toMatchObject({ kind: 'expert', status: 'pending', risk_level: 'high' });
    const run = await h.t.http.get(`/v1/runs/${runId}`).set(bearer(agentKey));
    expect(run.body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 1 });
    expect(h.emu.count({ vendor: 'shopify' })).toBe(before);
  });

  it('no credentials → 200 failed CREDENTIALS_NOT_FOUND', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const res = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND' });
  });

  it('vendor 500 → 200 failed VENDOR_ERROR with no vendor text for the model; the run keeps running', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, body: { errors: 'Internal kaboom at shard 7 token=abc' }, times: Infinity });
    try {
      const res = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', toolResult: { is_error: true } });
      expect(JSON.stringify(res.body)).not.toContain('kaboom');
      // A 5xx is the vendor's failure, not a refusal of the input: the model may try later, and a replay says the same.
      expect(res.body.toolResult.content).toBe('The vendor failed on its side, and the action failed. It may work later, as a new tool call.');
      const replay = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, res.body.toolResult.tool_use_id));
      expect(replay.body).toMatchObject({ replayed: true, toolResult: { content: res.body.toolResult.content } });
      const run = await h.t.http.get(`/v1/runs/${runId}`).set(bearer(agentKey));
      expect(run.body.status).toBe('running');
      const next = await h.t.http.get('/healthz');
      expect(next.status).toBe(200);
    } finally {
      h.emu.clearFaults();
    }
  });

  it('answers 400 for bodies that are not tool_use blocks, and records nothing', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    for (const body of [{}, { type: 'text', text: 'hi' }, { type: 'tool_use', id: 'x', name: 'order_lookup' }, [], { type: 'tool_use', id: 'x', name: 'оrder_lookup', input: {} }]) {
      const res = await post(runId, agentKey, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('BAD_REQUEST');
    }
    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE org_id = $1', [orgId])) as [{ n: number }];
    expect(n).toBe(0);
  });

  it('another org’s run → 404 RUN_NOT_FOUND, like a random id', async () => {
    const a = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const b = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const cross = await post(a.runId, b.agentKey, use);
    const random = await post(randomUUID(), b.agentKey, use);
    expect(cross.status).toBe(404);
    expect(cross.body.code).toBe('RUN_NOT_FOUND');
    expect({ ...cross.body, correlationId: 0 }).toEqual({ ...random.body, correlationId: 0 });
  });

  it('idempotency: 422 IDEMPOTENCY_KEY_REUSED on changed params; explicit keys are per org', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const key = { 'Idempotency-Key': `k-${randomUUID()}` };
    const first = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }), key);
    expect(first.status).toBe(200);
    const changed = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '450789469' }), key);
    expect(changed.status).toBe(422);
    expect(changed.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    // A new tool_use id under the same key: the key is what collided, and the answer says so.
    expect(changed.body.detail).toBe('this Idempotency-Key was already used for a different action: a key names one call (send a new call under a new key, or none)');
    const bad = await post(runId, agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '1' }), { 'Idempotency-Key': 'ü'.repeat(3) });
    expect(bad.status).toBe(400);
  });

  it('idempotency: 50 concurrent duplicates → exactly one vendor call', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 300 });
    const before = h.emu.count({ vendor: 'shopify' });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const results = await Promise.all(Array.from({ length: 50 }, () => post(runId, agentKey, use)));
    expect(h.emu.count({ vendor: 'shopify' }) - before).toBe(1);
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    for (const r of results) {
      if (r.status === 200) expect(r.body.status).toBe('succeeded');
      else {
        expect(r.status).toBe(409);
        expect(r.body.code).toBe('IDEMPOTENCY_IN_PROGRESS');
        expect(r.headers['retry-after']).toBeDefined();
      }
    }
    const ids = new Set(results.filter((r) => r.status === 200).map((r) => r.body.toolCallId));
    expect(ids.size).toBe(1);
    // A 409 names the call it waits on, so the agent can wait for it (GET …/result) and ops find it; so does its line.
    const waiting = results.find((r) => r.status === 409);
    expect(waiting, 'at least one duplicate came while the first was at the vendor').toBeDefined();
    expect(waiting!.body.toolCallId).toBe([...ids][0]);
    expect(await requestLineOf(waiting!)).toMatchObject({ code: 'IDEMPOTENCY_IN_PROGRESS', toolCallId: [...ids][0] });
  });

  it('admin endpoints reject an agent key; the catalog is readable', async () => {
    const { orgId, agentKey } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await h.t.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set(bearer(agentKey)).send({ enabled: false })).status).toBe(403);
    expect((await h.t.http.get('/v1/tools').set(adminAuth)).status).toBe(200);
  });
});
