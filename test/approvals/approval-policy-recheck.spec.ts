import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { aroundStatements, approvalFor, isClaim, refundUse, refunds } from './support.js';

const BLOCK_REFUNDS = [{ id: 'no-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'block', riskLevel: 'high', reason: 'fraud incident' }];

const CLIENT_CONFIRMS = [{ id: 'customer-confirms', match: { toolName: 'shopify_refund.create' }, decision: 'require_client_approval' }];
const EXPERT_ONLY = [{ id: 'expert-only', match: { toolName: 'shopify_refund.create' }, decision: 'require_expert_approval', reason: 'fraud incident' }];

/**
 * An approval speaks for the action, not for the rules it was judged under: an approved call is decided
 * again on the org's current policy before it reaches the vendor (a block added during an incident
 * stops the refunds already waiting for an expert, as it stops new ones; a policy raised to expert
 * approval stops those waiting for the client, which the org's own agent may approve).
 */
describe('approved calls and the current policy', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /**
   * A refund waiting for an expert under the default policy (a high-risk action: expert approval), or with
   * `kind` client waiting for the client under a rule that asks for it: the org's agent decides it (API.md §9).
   */
  async function waitingRefund(amount: string, kind: 'expert' | 'client' = 'expert', approverRole?: 'admin') {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: kind === 'client' ? CLIENT_CONFIRMS : undefined });
    const approver = approverRole ? await createKey(h.t, org.orgId, approverRole) : kind === 'client' ? { key: org.agentKey } : await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
    expect(res.status).toBe(202);
    const toolCallId = res.body.toolCallId as string;
    const approval = await approvalFor(h, approver.key, toolCallId);
    expect(approval.kind).toBe(kind);
    return {
      ...org,
      toolCallId,
      replacePolicy: async (rules: unknown[]) => expect((await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules })).status).toBe(200),
      /** Approves, and answers with the call once settled (long-poll). */
      approve: async () => {
        const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(approver.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
        expect([decided.status, decided.body.status]).toEqual([200, 'approved']);
        const t0 = performance.now();
        const result = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
        expect(performance.now() - t0).toBeLessThan(5_000); // settled, not the wait running out
        return result.body as { status: string; errorCode: string | null };
      },
      row: async () =>
        ((await h.t.ds.query('SELECT status, error_code, http_status, started_at FROM tool_calls WHERE id = $1', [toolCallId])) as Record<string, unknown>[])[0],
      inputs: async () => ((await h.t.ds.query('SELECT 1 FROM tool_call_inputs WHERE tool_call_id = $1', [toolCallId])) as unknown[]).length,
      events: async () =>
        (await h.t.ds.query('SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [toolCallId])) as {
          type: string;
          metadata: Record<string, unknown>;
        }[],
      story: async () => (await h.t.http.get(`/v1/tool-calls/${toolCallId}`).set(adminAuth)).body as { riskLevel: string; policyDecision: Record<string, unknown> },
    };
  }

  type Waiting = Awaited<ReturnType<typeof waitingRefund>>;

  /** Ended approved → blocked / POLICY_BLOCKED: nothing sent, its raw input gone, the block on the record like a submitted call's. */
  async function expectBlockedByPolicy(w: Waiting, refundsBefore: number, ruleId: string | null, reason: string) {
    expect(refunds(h) - refundsBefore).toBe(0);
    expect(await w.row()).toMatchObject({ status: 'blocked', error_code: 'POLICY_BLOCKED', http_status: 403, started_at: null });
    expect(await w.inputs()).toBe(0);
    const events = await w.events();
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.approval_requested', 'tool_call.approved', 'tool_call.blocked']);
    expect(events.at(-1)!.metadata).toMatchObject({ toolName: 'shopify_refund', action: 'create', errorCode: 'POLICY_BLOCKED', reason: 'policy', ruleId, afterApproval: true });
    const story = await w.story();
    expect(story.policyDecision).toMatchObject({ decision: 'block', ruleId, reason });
    return story;
  }

  it('a block added while a refund waits for an expert stops it once approved: blocked / POLICY_BLOCKED, no refund, its raw input deleted, on the record', async () => {
    const w = await waitingRefund('7.00');
    await w.replacePolicy(BLOCK_REFUNDS);
    const before = refunds(h);
    expect(await w.approve()).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });
    const story = await expectBlockedByPolicy(w, before, 'no-refunds', 'fraud incident');
    expect(story.riskLevel).toBe('high');
    const run = await h.t.http.get(`/v1/runs/${w.runId}`).set(bearer(w.agentKey));
    expect(run.body).toMatchObject({ status: 'running', pendingApprovalCount: 0 });
  });

  it.each([
    ['a block on another tool', [{ id: 'no-lookups', match: { toolName: 'order_lookup.*' }, decision: 'block', reason: 'incident' }]],
    ['a block on bigger refunds only', [{ id: 'no-big-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] }, decision: 'block' }]],
    ['a rule that asks for a client approval', CLIENT_CONFIRMS],
    ['a rule that asks for an expert again', EXPERT_ONLY],
    ['a rule that allows it', [{ id: 'refunds-ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }]],
  ])('a policy replaced by one that does not block it (%s): the expert-approved call runs, once', async (_why, rules) => {
    const w = await waitingRefund('7.01');
    await w.replacePolicy(rules);
    const before = refunds(h);
    expect(await w.approve()).toMatchObject({ status: 'succeeded' });
    expect(refunds(h) - before).toBe(1);
    expect((await w.events()).map((e) => e.type).slice(-2)).toEqual(['tool_call.started', 'tool_call.succeeded']);
  });

  it('a policy raised to expert approval while a refund waits for the client stops it once the agent approves it: blocked / POLICY_BLOCKED, no refund, on the record', async () => {
    const w = await waitingRefund('7.04', 'client');
    await w.replacePolicy(EXPERT_ONLY);
    const before = refunds(h);
    expect(await w.approve()).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });
    // The recorded decision is the block applied, on the rule that asks for the expert, at its risk.
    const story = await expectBlockedByPolicy(w, before, 'expert-only', 'policy now requires an expert approval');
    expect(story.riskLevel).toBe('high');
    expect((await w.events()).find((e) => e.type === 'tool_call.approved')!.metadata).toMatchObject({ kind: 'client', decision: 'approved' });
  });

  it('a client approval given by an org admin (who may decide expert approvals too) answers a policy raised to expert approval: it runs, once', async () => {
    const w = await waitingRefund('7.06', 'client', 'admin');
    await w.replacePolicy(EXPERT_ONLY);
    const before = refunds(h);
    expect(await w.approve()).toMatchObject({ status: 'succeeded' });
    expect(refunds(h) - before).toBe(1);
  });

  it.each([
    ['still asks for a client approval', CLIENT_CONFIRMS],
    ['allows it', [{ id: 'refunds-ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }]],
  ])('a policy replaced by one that %s: the client-approved call runs, once', async (_why, rules) => {
    const w = await waitingRefund('7.05', 'client');
    await w.replacePolicy(rules);
    const before = refunds(h);
    expect(await w.approve()).toMatchObject({ status: 'succeeded' });
    expect(refunds(h) - before).toBe(1);
  });

  it('a stored policy that fails validation (hand-edited) fails closed: the approved call ends blocked / POLICY_BLOCKED', async () => {
    const w = await waitingRefund('7.02');
    await h.t.ds.query(`INSERT INTO policies (org_id, rules, version) VALUES ($1, '[{"id": "broken", "decision": "perhaps"}]'::jsonb, 1)`, [w.orgId]);
    const before = refunds(h);
    expect(await w.approve()).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });
    await expectBlockedByPolicy(w, before, null, 'stored policy cannot be evaluated (fail closed)');
  });

  it('a block committed elsewhere between the decision and the claim (another replica, this one caching the old rules) is not missed', async () => {
    const w = await waitingRefund('7.03');
    const before = refunds(h);
    let claims = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (isClaim(text) && params[0] === w.toolCallId && claims++ === 0) {
        // As another replica's PUT would: this replica's policy cache is not told.
        await h.t.ds.query(`INSERT INTO policies (org_id, rules, version) VALUES ($1, $2::jsonb, 1)`, [w.orgId, JSON.stringify(BLOCK_REFUNDS)]);
      }
      return send();
    });
    try {
      expect(await w.approve()).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });
    } finally {
      undo();
    }
    expect(claims).toBe(2); // decided again on the new rules
    await expectBlockedByPolicy(w, before, 'no-refunds', 'fraud incident');
  });
});
