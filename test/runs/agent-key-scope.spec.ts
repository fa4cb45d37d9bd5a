import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/**
 * A run belongs to the agent key that started it (API.md §1: an agent reads "its runs'" tool definitions and "its own"
 * tool calls and results). Another agent key of the same org — a second bot, or the key that replaced this one — gets,
 * on every route naming the run or a call of it, the 404 a missing one gets, and nothing runs or changes. The org's
 * admin keys still reach every run. The run's client approvals are the exception: "Client approvals are decided by
 * any `agent` key of the run's org" (API.md §9).
 */
describe('runs: an agent key reaches only the runs it started', () => {
  let h: Harness;
  let a: OrgSetup; // a.agentKey is key A, which started a.runId
  let b: string; // key B: another agent key of the same org
  let bId: string;
  let ops: string;

  const note = () => toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note: 'hi' });
  const lookup = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
  const callsOf = async (runId: string): Promise<number> =>
    ((await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [runId])) as [{ n: number }])[0].n;
  const approvalOf = async (toolCallId: string) =>
    ((await h.t.ds.query('SELECT id, status, action_digest FROM approval_requests WHERE tool_call_id = $1', [toolCallId])) as {
      id: string;
      status: string;
      action_digest: string;
    }[])[0];
  const runStatus = async (runId: string): Promise<string> =>
    ((await h.t.ds.query('SELECT status FROM agent_runs WHERE id = $1', [runId])) as [{ status: string }])[0].status;
  const newRun = async (key: string): Promise<string> => {
    const res = await h.t.http.post('/v1/runs').set(bearer(key)).send({ specialistId: 'support' });
    expect(res.status).toBe(201);
    return (res.body as { id: string }).id;
  };
  /** A client approval pending in a fresh run of key A. */
  const pendingClientApproval = async () => {
    const runId = await newRun(a.agentKey);
    const call = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(a.agentKey)).send(note());
    expect(call.status, JSON.stringify(call.body)).toBe(202);
    const toolCallId = (call.body as { toolCallId: string }).toolCallId;
    return { runId, toolCallId, approval: await approvalOf(toolCallId) };
  };

  beforeAll(async () => {
    h = await startHarness();
    a = await setupOrg(h.t, {
      tools: ['order_lookup.lookup', 'shopify_order.add_note'],
      rules: [{ id: 'client-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'require_client_approval' }],
    });
    ({ key: b, id: bId } = await createKey(h.t, a.orgId, 'agent'));
    ops = (await createKey(h.t, a.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('GET /v1/runs/:runId and …/tools: 404 to another agent key; the run’s key, the org’s admin and ops keys read it', async () => {
    for (const path of [`/v1/runs/${a.runId}`, `/v1/runs/${a.runId}/tools`, `/v1/runs/${a.runId}/tools?format=openai`]) {
      const other = await h.t.http.get(path).set(bearer(b));
      expect(other.status, path).toBe(404);
      expect(other.body.code).toBe('NOT_FOUND');
      // Indistinguishable from a run that does not exist.
      const missing = await h.t.http.get(path.replace(a.runId, '00000000-0000-4000-8000-000000000000')).set(bearer(b));
      expect(missing.status).toBe(404);
      expect(missing.body.code).toBe(other.body.code);
      expect(missing.body.detail).toBe(other.body.detail);
      for (const key of [a.agentKey, a.adminKey, ops]) expect((await h.t.http.get(path).set(bearer(key))).status, path).toBe(200);
    }
  });

  it('POST …/tool-calls: 404 RUN_NOT_FOUND to another agent key, run cached or not, and no call recorded; the run’s key and the admin post', async () => {
    // Not cached yet on this replica: the snapshot is read for key B first.
    const fresh = await newRun(a.agentKey);
    const first = await h.t.http.post(`/v1/runs/${fresh}/tool-calls`).set(bearer(b)).send(lookup());
    expect(first.status).toBe(404);
    expect(first.body.code).toBe('RUN_NOT_FOUND');
    expect(await callsOf(fresh)).toBe(0);
    // Cached by key A's call: the cached snapshot is judged the same way.
    const mine = await h.t.http.post(`/v1/runs/${fresh}/tool-calls`).set(bearer(a.agentKey)).send(lookup());
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    expect(mine.body.status).toBe('succeeded');
    const cached = await h.t.http.post(`/v1/runs/${fresh}/tool-calls`).set(bearer(b)).send(lookup());
    expect(cached.status).toBe(404);
    expect(cached.body.code).toBe('RUN_NOT_FOUND');
    // Not even a replay of key A's own tool_use: the run is not B's.
    const replay = await h.t.http.post(`/v1/runs/${fresh}/tool-calls`).set(bearer(b)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, mine.body.toolResult.tool_use_id));
    expect(replay.status).toBe(404);
    expect(replay.body.code).toBe('RUN_NOT_FOUND');
    expect(await callsOf(fresh)).toBe(1);
    const admin = await h.t.http.post(`/v1/runs/${fresh}/tool-calls`).set(bearer(a.adminKey)).send(lookup());
    expect(admin.status, JSON.stringify(admin.body)).toBe(200);
    expect(await callsOf(fresh)).toBe(2);
  });

  it('POST …/tool-calls:batch: 404 RUN_NOT_FOUND for the whole batch to another agent key, nothing recorded', async () => {
    const runId = await newRun(a.agentKey);
    const other = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(b)).send({ toolUses: [lookup(), lookup()] });
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('RUN_NOT_FOUND');
    expect(await callsOf(runId)).toBe(0);
    const mine = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(a.agentKey)).send({ toolUses: [lookup(), lookup()] });
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    expect((mine.body as { results: { status: string }[] }).results.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    const again = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(b)).send({ toolUses: [lookup()] });
    expect(again.status).toBe(404);
    const admin = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(a.adminKey)).send({ toolUses: [lookup()] });
    expect(admin.status, JSON.stringify(admin.body)).toBe(200);
    expect(await callsOf(runId)).toBe(3);
  });

  it('an Idempotency-Key of another key’s call is never replayed to an agent key in its own run: 422, nothing recorded', async () => {
    const key = `agent-scope-${Date.now()}`;
    const mine = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).set('Idempotency-Key', key).send(lookup());
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    const runB = await newRun(b);
    const other = await h.t.http.post(`/v1/runs/${runB}/tool-calls`).set(bearer(b)).set('Idempotency-Key', key).send(lookup());
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(other.body.result).toBeUndefined();
    expect(await callsOf(runB)).toBe(0);
    // The run's key, and the org's admin key, still get the replay.
    for (const k of [a.agentKey, a.adminKey]) {
      const replay = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(k)).set('Idempotency-Key', key).send(lookup());
      expect(replay.status, JSON.stringify(replay.body)).toBe(200);
      expect(replay.body.replayed).toBe(true);
      expect(replay.body.toolCallId).toBe(mine.body.toolCallId);
    }
  });

  it('GET /v1/tool-calls/:id/result: 404 to another agent key (long-poll too); the run’s key and the admin read it', async () => {
    const call = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(lookup());
    expect(call.status).toBe(200);
    const id = (call.body as { toolCallId: string }).toolCallId;
    for (const q of ['', '?waitMs=100']) {
      const other = await h.t.http.get(`/v1/tool-calls/${id}/result${q}`).set(bearer(b));
      expect(other.status).toBe(404);
      expect(other.body.code).toBe('NOT_FOUND');
      expect(other.body.result).toBeUndefined();
    }
    const missing = await h.t.http.get('/v1/tool-calls/00000000-0000-4000-8000-000000000000/result').set(bearer(b));
    expect(missing.body.code).toBe('NOT_FOUND');
    for (const key of [a.agentKey, a.adminKey]) {
      const res = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(key));
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('succeeded');
    }
  });

  it('client approvals of another key’s run: listed, read and decided by any agent key of the org (API.md §9), its call’s result still 404', async () => {
    const { runId, toolCallId, approval } = await pendingClientApproval();
    expect(approval.status).toBe('pending');

    const listedTo = async (key: string, q = ''): Promise<string[]> => {
      const res = await h.t.http.get(`/v1/approvals${q}`).set(bearer(key));
      expect(res.status).toBe(200);
      return (res.body as { items: { id: string }[] }).items.map((i) => i.id);
    };
    expect(await listedTo(b)).toContain(approval.id);
    expect(await listedTo(b, `?runId=${runId}`)).toEqual([approval.id]);
    expect(await listedTo(b, '?status=pending&kind=client')).toContain(approval.id);
    expect(await listedTo(a.agentKey, `?runId=${runId}`)).toEqual([approval.id]);
    expect(await listedTo(a.adminKey, `?runId=${runId}`)).toEqual([approval.id]);

    const read = await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(b));
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: approval.id, kind: 'client', status: 'pending', actionDigest: approval.action_digest });
    // Key B still cannot wait on the call, nor read its result: the run and its calls are key A's.
    expect((await h.t.http.get(`/v1/tool-calls/${toolCallId}/result`).set(bearer(b))).status).toBe(404);

    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(b)).send({ decision: 'reject', actionDigest: approval.action_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    expect(decided.body).toMatchObject({ id: approval.id, status: 'rejected' });
    expect((await approvalOf(toolCallId)).status).toBe('rejected');
    expect(decided.body.decidedBy).toBe(bId);
    // The run's key reads the rejected outcome.
    const result = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result`).set(bearer(a.agentKey));
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ status: 'blocked', errorCode: 'CLIENT_REJECTED' });
  });

  it('another org’s agent key neither lists, reads nor decides the org’s client approvals (404, still pending)', async () => {
    const { toolCallId, approval } = await pendingClientApproval();
    const other = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const listed = await h.t.http.get('/v1/approvals').set(bearer(other.agentKey));
    expect(listed.status).toBe(200);
    expect((listed.body as { items: { id: string }[] }).items.map((i) => i.id)).not.toContain(approval.id);
    expect((await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(other.agentKey))).status).toBe(404);
    const decide = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(other.agentKey)).send({ decision: 'approve', actionDigest: approval.action_digest });
    expect(decide.status).toBe(404);
    expect(decide.body.code).toBe('NOT_FOUND');
    expect((await approvalOf(toolCallId)).status).toBe('pending');
  });

  it('the org’s admin key decides a client approval of an agent key’s run', async () => {
    const { approval } = await pendingClientApproval();
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(a.adminKey)).send({ decision: 'reject', actionDigest: approval.action_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    expect(decided.body.status).toBe('rejected');
  });

  it('POST …/complete and …/cancel: 404 to another agent key, the run stays open with its approval pending; the run’s key and the admin end runs', async () => {
    const { runId, toolCallId } = await pendingClientApproval();
    for (const end of ['complete', 'cancel']) {
      const res = await h.t.http.post(`/v1/runs/${runId}/${end}`).set(bearer(b)).send({ reason: 'not mine' });
      expect(res.status, end).toBe(404);
      expect(res.body.code).toBe('NOT_FOUND');
    }
    expect(await runStatus(runId)).toBe('waiting_approval');
    expect((await approvalOf(toolCallId)).status).toBe('pending');
    // Still open to its own key: it posts a call.
    expect((await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(a.agentKey)).send(lookup())).status).toBe(200);

    const cancelled = await h.t.http.post(`/v1/runs/${runId}/cancel`).set(bearer(a.adminKey)).send({ reason: 'kill switch' });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body.status).toBe('cancelled');
    expect((await approvalOf(toolCallId)).status).toBe('rejected');

    const own = await newRun(a.agentKey);
    const completed = await h.t.http.post(`/v1/runs/${own}/complete`).set(bearer(a.agentKey)).send({});
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    expect(completed.body.status).toBe('completed');
    // An ended run is no more another key's to read than an open one.
    expect((await h.t.http.get(`/v1/runs/${own}`).set(bearer(b))).status).toBe(404);
  });

  it('a replaced agent key does not continue its predecessor’s runs', async () => {
    const old = await createKey(h.t, a.orgId, 'agent');
    const runId = await newRun(old.key);
    expect((await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(old.key)).send(lookup())).status).toBe(200);
    const successor = (await createKey(h.t, a.orgId, 'agent')).key;
    expect((await h.t.http.delete(`/v1/api-keys/${old.id}`).set(bearer(a.adminKey))).status).toBe(204);
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(successor)).send(lookup());
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('RUN_NOT_FOUND');
    expect((await h.t.http.get(`/v1/runs/${runId}`).set(bearer(successor))).status).toBe(404);
    // The org's admin key still ends it.
    expect((await h.t.http.post(`/v1/runs/${runId}/complete`).set(bearer(a.adminKey)).send({})).status).toBe(200);
  });
});
