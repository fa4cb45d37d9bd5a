import type { QueryRunner } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { approvalFor, refundUse, refunds } from '../approvals/support.js';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Ending a run (POST /v1/runs/{id}/complete | cancel): nothing new executes in
 * it afterwards, on any replica; what it did before is still answered.
 */
describe('ending a run', () => {
  let h: Harness;
  let replica: TestApp;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    replica = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '2000', APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });

  const post = (via: TestApp, org: OrgSetup, use: ReturnType<typeof toolUse>) => via.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
  const lookupUse = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
  const end = (via: TestApp, org: OrgSetup, how: 'complete' | 'cancel', key = org.agentKey, body: object = {}) =>
    via.http.post(`/v1/runs/${org.runId}/${how}`).set(bearer(key)).send(body);
  const callCount = async (org: OrgSetup) => Number(((await h.t.ds.query('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: string }])[0].n);

  it('completed: new calls get 409 RUN_NOT_ACTIVE and record nothing; a call made before is still replayed; completing again answers the run', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const earlier = lookupUse();
    expect((await post(h.t, org, earlier)).body.status).toBe('succeeded');
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body.ended).toBeNull();

    const before = Date.now();
    const done = await end(h.t, org, 'complete', org.agentKey, { reason: 'conversation closed' });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body).toMatchObject({ id: org.runId, status: 'completed', pendingApprovalCount: 0, ended: { reason: 'conversation closed' } });
    // The reason the end was given is on the run (ops and the agent can read why it stopped), with when.
    const endedAt = Date.parse(done.body.ended.at as string);
    expect(endedAt).toBeGreaterThanOrEqual(before - 1_000);
    expect(endedAt).toBeLessThanOrEqual(Date.now() + 1_000);

    const vendorBefore = h.emu.count({ vendor: 'shopify' });
    const late = await post(h.t, org, lookupUse());
    expect([late.status, late.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect(late.headers['content-type']).toContain('application/problem+json');
    expect(await callCount(org)).toBe(1);
    expect(h.emu.count({ vendor: 'shopify' })).toBe(vendorBefore);

    const replay = await post(h.t, org, earlier);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ status: 'succeeded', replayed: true });

    // Completing again answers the run as it ended: the first end's time and reason stay.
    expect((await end(h.t, org, 'complete', org.agentKey, { reason: 'again' })).body).toMatchObject({ status: 'completed', ended: done.body.ended });
    const cancel = await end(h.t, org, 'cancel');
    expect([cancel.status, cancel.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body.status).toBe('completed');

    const events = (await h.t.ds.query(`SELECT type, actor, metadata FROM runtime_ledger_events WHERE run_id = $1 AND type LIKE 'run.%' ORDER BY seq`, [org.runId])) as {
      type: string; actor: { role: string }; metadata: Record<string, unknown>;
    }[];
    expect(events.map((e) => e.type)).toEqual(['run.created', 'run.completed']);
    expect(events[1]).toMatchObject({ actor: { role: 'agent' }, metadata: { reasonGiven: true, blockedCalls: 0 } });
    expect(JSON.stringify(events)).not.toContain('conversation closed'); // free text stays off the append-only ledger
  });

  it('another replica that cached the run as active refuses new calls once it ended (no stale cache)', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await post(replica, org, lookupUse())).body.status).toBe('succeeded'); // the replica caches the run
    const cancelled = await end(h.t, org, 'cancel');
    expect(cancelled.body).toMatchObject({ status: 'cancelled', ended: { at: expect.any(String), reason: null } });
    const late = await post(replica, org, lookupUse());
    expect([late.status, late.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect(await callCount(org)).toBe(1);
    // Batches too: the whole batch, or each item when the replica still thought the run active.
    const batch = await replica.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: [lookupUse()] });
    expect(batch.status === 409 ? batch.body.code : batch.body.results?.[0]?.code).toBe('RUN_NOT_ACTIVE');
    expect(await callCount(org)).toBe(1);
  });

  it('a replica that cached the run as active and has no free vendor slot still answers 409 RUN_NOT_ACTIVE, not 429 "retry shortly"', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await post(replica, org, lookupUse())).body.status).toBe('succeeded'); // the replica caches the run
    expect((await end(h.t, org, 'complete')).body.status).toBe('completed');
    const calls = replica.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(org.orgId, 'shopify'); r; r = calls.leaseFor(org.orgId, 'shopify')) held.push(r);
    try {
      expect(held.length).toBeGreaterThan(0);
      const late = await post(replica, org, lookupUse());
      expect([late.status, late.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
      expect(await h.t.ds.query(`SELECT 1 FROM runtime_ledger_events WHERE run_id = $1 AND type = 'tool_call.rejected'`, [org.runId])).toHaveLength(0);
    } finally {
      held.forEach((r) => r());
    }
  });

  it('cancelled with a call waiting for approval: the approval is rejected, the call blocked, nothing ever executes', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const use = refundUse('3.00');
    const res = await post(h.t, org, use);
    expect(res.status).toBe(202);
    const callId = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, callId);
    const before = refunds(h);

    const cancelled = await end(h.t, org, 'cancel', org.adminKey, { reason: 'agent misbehaving' });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', pendingApprovalCount: 0, ended: { at: expect.any(String), reason: 'agent misbehaving' } });

    const a = await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key));
    // Who ended it decided, and why is shown (it used to be stored, never answered).
    expect(a.body).toMatchObject({ status: 'rejected', decidedBy: expect.any(String), decisionReason: 'agent misbehaving' });
    const listed = await h.t.http.get(`/v1/approvals?runId=${org.runId}`).set(bearer(expert.key));
    expect(listed.body.items.map((i: { id: string; decisionReason: string | null }) => [i.id, i.decisionReason])).toEqual([[approval.id, 'agent misbehaving']]);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect([decided.status, decided.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);

    const [row] = (await h.t.ds.query('SELECT status, error_code, http_status FROM tool_calls WHERE id = $1', [callId])) as Record<string, unknown>[];
    // A blocked call's body, as every blocked one (API.md §9: tool-call bodies are 200/202/403/422).
    expect(row).toEqual({ status: 'blocked', error_code: 'RUN_NOT_ACTIVE', http_status: 403 });
    expect(await h.t.ds.query('SELECT 1 FROM tool_call_inputs WHERE tool_call_id = $1', [callId])).toHaveLength(0);
    const blocked = (await h.t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.blocked'`, [callId])) as {
      metadata: Record<string, unknown>;
    }[];
    expect(blocked.map((e) => e.metadata)).toEqual([expect.objectContaining({ errorCode: 'RUN_NOT_ACTIVE', reason: 'run_ended', approvalId: approval.id })]);
    const result = await h.t.http.get(`/v1/tool-calls/${callId}/result`).set(bearer(org.agentKey));
    expect(result.body).toMatchObject({ status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
    // The model is told what happened: nothing ran, and the run is over (not "the vendor failed, try again").
    expect(result.body.toolResult.content).toBe('The run this action belonged to was completed or cancelled before it ran. It was not executed.');
    const repost = await post(h.t, org, use);
    expect([repost.status, repost.headers['content-type']]).toEqual([403, expect.stringContaining('application/json')]);
    expect(repost.body).toMatchObject({ status: 'blocked', errorCode: 'RUN_NOT_ACTIVE', replayed: true });
    // The approval sweep and runner have nothing to pick up.
    await new Promise((r) => setTimeout(r, 300));
    expect(refunds(h)).toBe(before);
    expect(h.emu.vendor<ShopifyEmulator>('shopify').refundCount('12345')).toBe(before);
  });

  describe('racing the statements that start calls (a third transaction holds a lock, so both are in flight)', () => {
    const lockWaiters = async (): Promise<number> =>
      Number(((await h.t.ds.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)) as [{ n: number }])[0].n);
    async function waitForWaiters(n: number): Promise<void> {
      const until = Date.now() + 5_000;
      while ((await lockWaiters()) < n) {
        if (Date.now() > until) throw new Error(`fewer than ${n} lock waiters`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    async function holding(sql: string, params: unknown[]): Promise<QueryRunner> {
      const qr = h.t.ds.createQueryRunner();
      await qr.connect();
      await qr.startTransaction();
      await qr.query(sql, params);
      return qr;
    }
    const runRow = async (org: OrgSetup) =>
      ((await h.t.ds.query('SELECT status, pending_approval_count FROM agent_runs WHERE id = $1', [org.runId])) as { status: string; pending_approval_count: number }[])[0];

    it('an end that goes first: a call that needs approval, waiting meanwhile, is refused and does not bring the run back', async () => {
      const org = await setupOrg(h.t, { tools: ['shopify_refund.create', 'order_lookup.lookup'] });
      const qr = await holding('SELECT 1 FROM agent_runs WHERE id = $1 FOR UPDATE', [org.runId]);
      const ending = end(h.t, org, 'complete').then((r) => r);
      await waitForWaiters(1);
      const refund = post(h.t, org, refundUse('2.00')).then((r) => r);
      await waitForWaiters(2);
      await qr.commitTransaction();
      await qr.release();
      const [e, r] = await Promise.all([ending, refund]);
      expect(e.body.status).toBe('completed');
      expect([r.status, r.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
      expect(await runRow(org)).toEqual({ status: 'completed', pending_approval_count: 0 });
      expect(await callCount(org)).toBe(0);
      expect([(await post(h.t, org, lookupUse())).status]).toEqual([409]);
    });

    it('a call that needs approval and goes first: the end that waited rejects its approval and blocks it', async () => {
      const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
      const qr = await holding('SELECT 1 FROM agent_runs WHERE id = $1 FOR UPDATE', [org.runId]);
      const refund = post(h.t, org, refundUse('3.00')).then((r) => r);
      await waitForWaiters(1);
      const ending = end(h.t, org, 'cancel').then((r) => r);
      await waitForWaiters(2);
      await qr.commitTransaction();
      await qr.release();
      const [r, e] = await Promise.all([refund, ending]);
      expect(r.status).toBe(202);
      expect(e.body).toMatchObject({ status: 'cancelled', pendingApprovalCount: 0 });
      const callId = r.body.toolCallId as string;
      expect(await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE id = $1', [callId])).toEqual([{ status: 'blocked', error_code: 'RUN_NOT_ACTIVE' }]);
      expect(await h.t.ds.query('SELECT status FROM approval_requests WHERE tool_call_id = $1', [callId])).toEqual([{ status: 'rejected' }]);
      expect(await runRow(org)).toEqual({ status: 'cancelled', pending_approval_count: 0 });
      // Ended without a reason: none is shown on the approval either.
      const story = await h.t.http.get(`/v1/tool-calls/${callId}`).set(bearer(org.adminKey));
      expect(story.body.approval).toMatchObject({ status: 'rejected', decisionReason: null });
    });

    it('an end waits for a call whose intent is in flight: that call was accepted first, and is on the ledger before the end', async () => {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
      const first = await post(h.t, org, lookupUse());
      const use = lookupUse();
      // Another transaction holds the call's idempotency key and tool_use id: its intent waits there, after reading the run.
      const qr = await holding(
        `INSERT INTO tool_calls SELECT (jsonb_populate_record(NULL::tool_calls, to_jsonb(t) || jsonb_build_object('id', gen_random_uuid(), 'idempotency_key', $2::text, 'tool_use_id', $3::text))).*
           FROM tool_calls t WHERE t.id = $1`,
        [first.body.toolCallId, `run:${org.runId}:${use.id}`, use.id],
      );
      const call = post(h.t, org, use).then((r) => r);
      await waitForWaiters(1);
      const ending = end(h.t, org, 'complete').then((r) => r);
      await waitForWaiters(2);
      await qr.rollbackTransaction();
      await qr.release();
      const [c, e] = await Promise.all([call, ending]);
      expect(c.body.status).toBe('succeeded');
      expect(e.body.status).toBe('completed');
      const order = (await h.t.ds.query(
        `SELECT type FROM runtime_ledger_events WHERE run_id = $1 AND (tool_call_id = $2 OR type = 'run.completed') AND type IN ('tool_call.requested', 'run.completed') ORDER BY seq`,
        [org.runId, c.body.toolCallId],
      )) as { type: string }[];
      expect(order.map((o) => o.type)).toEqual(['tool_call.requested', 'run.completed']);
    });
  });

  it('a batch resent after the run ended replays the calls it made; a batch of new calls is one 409', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = lookupUse();
    const batch = (toolUses: unknown[]) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses });
    expect((await batch([use])).body.results[0].status).toBe('succeeded');
    expect((await end(h.t, org, 'complete')).body.status).toBe('completed');
    const again = await batch([use, lookupUse()]);
    expect(again.status).toBe(200);
    expect(again.body.results[0]).toMatchObject({ status: 'succeeded', replayed: true });
    expect(again.body.results[1]).toMatchObject({ code: 'RUN_NOT_ACTIVE' });
    const fresh = await batch([lookupUse(), lookupUse()]);
    expect([fresh.status, fresh.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect(await callCount(org)).toBe(1);
  });

  it('who may end it: agent and admin keys of the org; not ops, not another org', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ops = await createKey(h.t, org.orgId, 'ops');
    expect((await end(h.t, org, 'cancel', ops.key)).status).toBe(403);
    const other = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await end(h.t, org, 'cancel', other.agentKey)).status).toBe(404);
    const bad = await end(h.t, org, 'complete', org.agentKey, { reason: 'x'.repeat(501) });
    expect([bad.status, bad.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const unknown = await h.t.http.post('/v1/runs/not-a-uuid/complete').set(bearer(org.agentKey)).send({});
    expect(unknown.status).toBe(404);
    // Still running after the refusals.
    expect((await post(h.t, org, lookupUse())).body.status).toBe('succeeded');
  });
});
