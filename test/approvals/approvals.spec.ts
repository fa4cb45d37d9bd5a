import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse, refunds } from './support.js';

describe('expert approvals', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function waitingRefund(amount = '1.00') {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const use = refundUse(amount);
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(res.status).toBe(202);
    const approval = await approvalFor(h, expert.key, res.body.toolCallId);
    return { ...org, expert, use, toolCallId: res.body.toolCallId as string, approval };
  }

  it('shows the approval with redacted params, risk, reason, digest and expiry', async () => {
    const w = await waitingRefund();
    const res = await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(w.expert.key));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: w.approval.id, toolCallId: w.toolCallId, runId: w.runId, kind: 'expert', status: 'pending', toolName: 'shopify_refund',
      action: 'create', inputRedacted: { orderId: '12345', amount: '1.00' }, riskLevel: 'high', decidedBy: null,
    });
    expect(res.body.actionDigest).toMatch(/^[0-9a-f]{64}$/);
    expect(Date.parse(res.body.expiresAt)).toBeGreaterThan(Date.now());
  });

  it('says whether the input shown is exactly the input that runs: true for a refund; false when redaction hid, cut or replaced part of a write (two writes shown alike), in the view and the listing', async () => {
    const w = await waitingRefund('1.50');
    expect((await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(w.expert.key))).body).toMatchObject({ inputRedacted: { amount: '1.50' }, inputShownExactly: true });

    const org = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const post = async (body: unknown) => {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send({ type: 'tool_use', id: `toolu_${randomUUID()}`, name: 'nango_proxy', input: { action: 'post', path: '/v1/tokens', body } });
      expect(res.status, res.text).toBe(202);
      const a = await approvalFor(h, expert.key, res.body.toolCallId);
      return (await h.t.http.get(`/v1/approvals/${a.id}`).set(bearer(expert.key))).body as Record<string, unknown>;
    };
    const cases: [string, unknown, boolean][] = [
      ['plain', { role: 'owner', note: '[REDACTED]' }, true], // a marker the caller wrote is what runs
      ['a secret-looking name', { token_scope: 'admin' }, false],
      ['a card-shaped value', { channel: '4242424242424242' }, false],
      ['past the size bounds', { text: 'x'.repeat(10_001) }, false],
      ['a NUL', { text: 'pay\u0000' }, false], // recorded as U+FFFD (an unpaired surrogate is refused: 422, nothing to approve)
    ];
    const seen: Record<string, unknown> = {};
    for (const [name, body] of cases) seen[name] = (await post(body)).inputShownExactly;
    expect(seen).toEqual(Object.fromEntries(cases.map(([name, , exact]) => [name, exact])));
    const listed = (await h.t.http.get(`/v1/approvals?status=pending`).set(bearer(expert.key))).body.items as { inputShownExactly: unknown }[];
    expect(listed.map((a) => a.inputShownExactly).sort()).toEqual(cases.map(([, , exact]) => exact).sort());
  });

  it('approve → executes once; the agent gets the result by long-poll and by re-post', async () => {
    const w = await waitingRefund('2.00');
    const before = refunds(h);
    const waiting = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result`).set(bearer(w.agentKey));
    expect(waiting.status).toBe(200); // not the 202 the tool-call post answered
    expect(waiting.body).toMatchObject({ toolCallId: w.toolCallId, status: 'waiting_approval' });
    const poll = h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=10000`).set(bearer(w.agentKey));
    const decided = await h.t.http
      .post(`/v1/approvals/${w.approval.id}/decision`)
      .set(bearer(w.expert.key))
      .set('X-Correlation-Id', 'expert-decision-1')
      .send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ status: 'approved', decidedBy: w.expert.id, decisionReason: null });
    const result = await poll;
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ toolCallId: w.toolCallId, status: 'succeeded' });
    expect(refunds(h) - before).toBe(1);

    const again = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect(again.status).toBe(409);
    const repost = await h.t.http.post(`/v1/runs/${w.runId}/tool-calls`).set(bearer(w.agentKey)).send(w.use);
    expect(repost.status).toBe(200);
    expect(repost.body).toMatchObject({ status: 'succeeded', replayed: true });
    expect(refunds(h) - before).toBe(1);

    const events = (await h.t.ds.query('SELECT type, actor FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [w.toolCallId])) as {
      type: string;
      actor: { role: string; correlationId?: string } | null;
    }[];
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.approval_requested', 'tool_call.approved', 'tool_call.started', 'tool_call.succeeded']);
    // Who caused what: the agent asked, the expert approved; the gateway started the approved call and recorded its outcome.
    expect(events.map((e) => e.actor?.role ?? null)).toEqual(['agent', 'agent', 'expert', null, null]);
    // The decision was another request than the call's: its event names it (the call's own events have the call's id).
    expect(events.map((e) => e.actor?.correlationId ?? null)).toEqual([null, null, 'expert-decision-1', null, null]);
    const run = await h.t.http.get(`/v1/runs/${w.runId}`).set(bearer(w.agentKey));
    expect(run.body).toMatchObject({ status: 'running', pendingApprovalCount: 0 });
  });

  it.each([
    ['its approved input is gone', 'DELETE FROM tool_call_inputs WHERE tool_call_id = $1'],
    // Both rows name the dropped action, as for a call recorded under an action a later release removed: an approval
    // row naming another action than its call's is refused at the decision (approval-input-binding.spec.ts).
    [
      'its action is no longer in the catalog',
      "WITH a AS (UPDATE approval_requests SET action = 'create_v0' WHERE tool_call_id = $1) UPDATE tool_calls SET action = 'create_v0' WHERE id = $1",
    ],
  ])('an approved call that cannot run (%s) is recorded like any outcome: failed / EXECUTION_ERROR, terminal event, no cost, nothing sent, the long-poll answered', async (_why, sql) => {
    const w = await waitingRefund();
    const before = refunds(h);
    await h.t.ds.query(sql, [w.toolCallId]);
    const poll = h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=10000`).set(bearer(w.agentKey));
    const decided = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect(decided.status).toBe(200);
    const t0 = performance.now();
    const result = await poll;
    expect(performance.now() - t0).toBeLessThan(5_000); // settled, not the 10 s wait running out
    expect(result.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
    expect(refunds(h)).toBe(before);
    const [row] = (await h.t.ds.query('SELECT status, error_code, cost_cents, finished_at FROM tool_calls WHERE id = $1', [w.toolCallId])) as Record<string, unknown>[];
    expect(row).toMatchObject({ status: 'failed', error_code: 'EXECUTION_ERROR', cost_cents: 0 });
    expect(row.finished_at).not.toBeNull();
    const events = (await h.t.ds.query('SELECT type FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [w.toolCallId])) as { type: string }[];
    expect(events.map((e) => e.type).at(-1)).toBe('tool_call.failed');
    expect(await h.t.ds.query('SELECT 1 FROM tool_call_inputs WHERE tool_call_id = $1', [w.toolCallId])).toEqual([]);
  });

  it('reject → blocked / EXPERT_REJECTED, nothing executed, the model told plainly', async () => {
    const w = await waitingRefund();
    const before = refunds(h);
    const res = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'reject', actionDigest: w.approval.actionDigest, reason: 'too generous' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('rejected');
    // The expert's reason is on the approval for whoever reads it next.
    expect(res.body.decisionReason).toBe('too generous');
    expect((await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(w.expert.key))).body.decisionReason).toBe('too generous');
    const result = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result`).set(bearer(w.agentKey));
    expect(result.status).toBe(200); // API.md: the result route answers 200 whatever the call's status
    expect(result.body).toMatchObject({ status: 'blocked', errorCode: 'EXPERT_REJECTED' });
    expect(result.body.toolResult.content).toMatch(/rejected/);
    const repost = await h.t.http.post(`/v1/runs/${w.runId}/tool-calls`).set(bearer(w.agentKey)).send(w.use);
    expect(repost.status).toBe(403);
    expect(repost.body).toMatchObject({ errorCode: 'EXPERT_REJECTED', replayed: true });
    expect(refunds(h)).toBe(before);
  });

  it('a wrong digest → 409; an agent key (which may not see expert approvals) → 404 like an unknown id; another org → 404', async () => {
    const w = await waitingRefund();
    const wrong = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: 'a'.repeat(64) });
    expect(wrong.status).toBe(409);
    expect(wrong.body.code).toBe('ACTION_DIGEST_MISMATCH');
    const agent = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.agentKey)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    const unknown = await h.t.http.post(`/v1/approvals/${randomUUID()}/decision`).set(bearer(w.agentKey)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    // API.md §9: a wrong-role caller learns nothing about existence (GET /v1/approvals/:id hides it from agents the same way).
    expect(agent.status).toBe(404);
    expect({ ...agent.body, correlationId: 0 }).toEqual({ ...unknown.body, correlationId: 0 });
    const other = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const otherExpert = await createKey(h.t, other.orgId, 'expert');
    const foreign = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(otherExpert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    const random = await h.t.http.post(`/v1/approvals/${randomUUID()}/decision`).set(bearer(otherExpert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect(foreign.status).toBe(404);
    expect({ ...foreign.body, correlationId: 0 }).toEqual({ ...random.body, correlationId: 0 });
    const stillPending = await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(w.expert.key));
    expect(stillPending.body.status).toBe('pending');
  });

  it('tool calling turned off while a call waits → approving it blocks it FEATURE_DISABLED; nothing reaches the vendor', async () => {
    const w = await waitingRefund('4.00');
    const before = refunds(h);
    const pending = await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(w.expert.key));
    expect(pending.body).toMatchObject({ status: 'pending', toolCallStatus: 'waiting_approval', toolCallErrorCode: null });
    const off = await h.t.http.put(`/v1/orgs/${w.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
    expect(off.status).toBe(200);
    const poll = h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=10000`).set(bearer(w.agentKey));
    const decided = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect(decided.status).toBe(200);
    const result = await poll;
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ toolCallId: w.toolCallId, status: 'blocked', errorCode: 'FEATURE_DISABLED' });
    await h.t.app.get(ApprovedCallRunner).sweep();
    expect(refunds(h)).toBe(before);
    // The expert, who may not read the ledger, sees what became of the call the approval let through.
    const approval = await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(w.expert.key));
    expect(approval.body).toMatchObject({ status: 'approved', toolCallStatus: 'blocked', toolCallErrorCode: 'FEATURE_DISABLED' });
    const listed = await h.t.http.get(`/v1/approvals?runId=${w.runId}`).set(bearer(w.expert.key));
    expect(listed.body.items.find((a: { id: string }) => a.id === w.approval.id)).toMatchObject({ toolCallStatus: 'blocked', toolCallErrorCode: 'FEATURE_DISABLED' });
    const events = (await h.t.ds.query('SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [w.toolCallId])) as { type: string; metadata: Record<string, unknown> }[];
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.approval_requested', 'tool_call.approved', 'tool_call.blocked']);
    expect(events[3].metadata).toMatchObject({ errorCode: 'FEATURE_DISABLED', reason: 'feature_disabled', afterApproval: true });
    const [input] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_inputs WHERE tool_call_id = $1', [w.toolCallId])) as { n: number }[];
    expect(input.n).toBe(0); // the approved raw input is not kept for a call that will never run
    const repost = await h.t.http.post(`/v1/runs/${w.runId}/tool-calls`).set(bearer(w.agentKey)).send(w.use);
    expect(repost.status).toBe(403);
    expect(repost.body).toMatchObject({ status: 'blocked', errorCode: 'FEATURE_DISABLED', replayed: true });
  });

  it('approved calls take a slot of the org × vendor concurrency limit: with none free the call waits, approved, for a sweep', async () => {
    const w = await waitingRefund('5.00');
    const before = refunds(h);
    const calls = h.t.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(w.orgId, 'shopify'); r; r = calls.leaseFor(w.orgId, 'shopify')) held.push(r);
    expect(held.length).toBeGreaterThan(0);
    try {
      const decided = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
      expect(decided.status).toBe(200);
      await h.t.app.get(ApprovedCallRunner).sweep();
      const waiting = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result`).set(bearer(w.agentKey));
      expect(waiting.body.status).toBe('approved');
      expect(refunds(h)).toBe(before);
    } finally {
      for (const r of held) r();
    }
    await h.t.app.get(ApprovedCallRunner).sweep();
    const done = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=10000`).set(bearer(w.agentKey));
    expect(done.body.status).toBe('succeeded');
    expect(refunds(h) - before).toBe(1);
    expect(calls.leaseFor(w.orgId, 'shopify')).not.toBeNull(); // and its own slot was given back
  });

  it('the periodic pass does not wait for a slow approved call it started: expiries go on, and a second pass does not start it again', async () => {
    const w = await waitingRefund('6.00');
    const before = refunds(h);
    const runner = h.t.app.get(ApprovedCallRunner);
    const calls = h.t.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(w.orgId, 'shopify'); r; r = calls.leaseFor(w.orgId, 'shopify')) held.push(r);
    try {
      // Approved while no slot is free: the call waits, approved, for a pass to start it. The decision's own
      // attempt runs behind its answer; the slots stay held until it has given up, or it would take one.
      expect((await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest })).status).toBe(200);
      await waitFor(() => h.t.logs.some((l) => l.includes('approved call deferred') && l.includes(w.toolCallId)), 'the decision’s own attempt to be deferred');
    } finally {
      // Its kept slot let go first: a slot given back would wake it at once (ConcurrencyLeases), and this is about a pass starting it.
      calls.unreserve(w.toolCallId);
      for (const r of held) r();
    }
    const w2 = await waitingRefund('7.00'); // expires at the third pass, while the refund is still at the vendor
    const from = h.emu.requests.length;
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_500, bodyMatch: /refundCreate/ });
    expect(await runner.tick()).toMatchObject({ started: 1 });
    expect(await runner.tick()).toMatchObject({ started: 0 }); // running here: not started (nor leased) twice
    const clock = h.t.app.get(Clock);
    clock.advance(3_601_000);
    try {
      expect((await runner.tick()).expired).toBeGreaterThanOrEqual(1);
    } finally {
      clock.advance(-3_601_000);
    }
    // The passes did not wait for the 1.5 s refund: it has not been answered yet (an order of events, not a
    // wall-clock bound; only three passes' own queries stand between its start and here).
    const answered = h.emu.requests
      .slice(from)
      .filter((r) => /refundCreate/.test(r.body) && r.finishedAt !== undefined)
      .map((r) => ({ receivedAt: r.receivedAt, finishedAt: r.finishedAt }));
    expect(answered, 'the refund was still at the vendor when the passes had returned').toEqual([]);
    expect((await h.t.http.get(`/v1/approvals/${w2.approval.id}`).set(bearer(w2.expert.key))).body.status).toBe('expired');
    const done = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=10000`).set(bearer(w.agentKey));
    expect(done.body.status).toBe('succeeded');
    expect(refunds(h) - before).toBe(1);
  });

  it('50 concurrent approves → one execution and 49 × 409', async () => {
    const w = await waitingRefund('3.00');
    const before = refunds(h);
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(49);
    const result = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=10000`).set(bearer(w.agentKey));
    expect(result.body.status).toBe('succeeded');
    await h.t.app.get(ApprovedCallRunner).sweep();
    expect(refunds(h) - before).toBe(1);
  });

  it('expiry: the sweep blocks it with APPROVAL_EXPIRED and a late approve is refused', async () => {
    const w = await waitingRefund();
    const clock = h.t.app.get(Clock);
    clock.advance(3_601_000);
    try {
      const late = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
      expect(late.status).toBe(409);
      const result = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result`).set(bearer(w.agentKey));
      expect(result.status).toBe(200);
      expect(result.body).toMatchObject({ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });
      expect(result.body.toolResult.content).toMatch(/expired/);

      const w2 = await waitingRefund();
      clock.advance(3_601_000);
      await h.t.app.get(ApprovedCallRunner).sweep();
      const swept = await h.t.http.get(`/v1/approvals/${w2.approval.id}`).set(bearer(w2.expert.key));
      expect(swept.body.status).toBe('expired');
      const run = await h.t.http.get(`/v1/runs/${w2.runId}`).set(bearer(w2.agentKey));
      expect(run.body).toMatchObject({ status: 'running', pendingApprovalCount: 0 });
    } finally {
      clock.advance(-2 * 3_601_000);
    }
  });

  it('lists pending approvals with keyset pagination', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    for (let i = 0; i < 5; i++) await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00'));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.t.http.get(`/v1/approvals?status=pending&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`).set(bearer(expert.key));
      expect(res.status).toBe(200);
      seen.push(...(res.body.items as { id: string }[]).map((a) => a.id));
      cursor = res.body.nextCursor as string | null;
    } while (cursor);
    expect(seen).toHaveLength(5);
    expect(new Set(seen).size).toBe(5);
    const tampered = await h.t.http.get('/v1/approvals?cursor=abc.def').set(bearer(expert.key));
    expect(tampered.status).toBe(400);
  });

  it('an org key naming another org in ?orgId= gets 404 (as every listing); its own org 200; a malformed orgId 400', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const other = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    expect((await h.t.http.get(`/v1/approvals?orgId=${other.orgId}`).set(bearer(expert.key))).status).toBe(404);
    expect((await h.t.http.get(`/v1/approvals?orgId=${org.orgId.toUpperCase()}`).set(bearer(expert.key))).status).toBe(200);
    const bad = await h.t.http.get('/v1/approvals?orgId=abc').set(adminAuth);
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('VALIDATION_FAILED');
  });
});

describe('client approvals', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('are relayed by the agent key and run once', async () => {
    const rules = [{ id: 'customer-confirms-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'require_client_approval', reason: 'the customer confirms' }];
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send({ type: 'tool_use', id: 'toolu_note_1', name: 'shopify_order', input: { action: 'add_note', orderId: '12345', note: 'gift wrap please' } });
    expect(res.status).toBe(202);
    expect(res.body.toolResult.content).toMatch(/customer/);
    const approval = await approvalFor(h, org.agentKey, res.body.toolCallId);
    expect(approval.kind).toBe('client');
    const expert = await createKey(h.t, org.orgId, 'expert');
    const byExpert = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(byExpert.status).toBe(403);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(org.agentKey)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const result = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId}/result?waitMs=10000`).set(bearer(org.agentKey));
    expect(result.body.status).toBe('succeeded');
    expect(h.emu.count({ vendor: 'shopify', path: /graphql/ })).toBe(1);
  });
});
