import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { aroundStatements, approvalFor, refundUse } from './support.js';

/** The sweep's expiry statement (settleApprovalsSql('expired')): the only statement that selects overdue approvals in bulk. */
const isSweepExpiry = (text: string): boolean => text.includes('$1::uuid IS NULL') && text.includes('approval_requests');

/**
 * API.md §5: an approval that expires ends its call blocked / APPROVAL_EXPIRED; README: "reads show it expired
 * from the moment it passes". The approvals sweep writes expiries down only every few seconds: a read that finds
 * one past its expiry first — GET …/result, a long-poll, a re-post of the tool_use, the run — settles it then,
 * with the statement a decision and the sweep use, instead of answering waiting_approval ("do not send it again,
 * it will be decided") for an approval nobody can decide any more.
 */
describe('an approval past its expiry, read before the sweep wrote it down', () => {
  let h: Harness;
  let clock: Clock;
  let advanced = 0;
  let releaseSweep: () => void;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '60' });
    clock = h.t.app.get(Clock);
    // The periodic sweep expires nothing while these run: what the reads answer is their own doing.
    releaseSweep = aroundStatements(h.t.app.get(Sql), (text, _params, send) => (isSweepExpiry(text) ? Promise.resolve([]) : send()));
  });
  afterAll(async () => {
    releaseSweep?.();
    clock?.advance(-advanced);
    await h?.close();
  });

  const advance = (ms: number): void => {
    clock.advance(ms);
    advanced += ms;
  };

  async function waitingRefund(o?: Awaited<ReturnType<typeof setupOrg>>, amount = '6.00') {
    const org = o ?? (await setupOrg(h.t, { tools: ['shopify_refund.create'] }));
    const expert = await createKey(h.t, org.orgId, 'expert');
    const use = refundUse(amount);
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(res.status).toBe(202);
    const toolCallId = res.body.toolCallId as string;
    return { ...org, org, expert, use, toolCallId, approval: await approvalFor(h, expert.key, toolCallId) };
  }

  const stored = async (toolCallId: string) => {
    const [row] = (await h.t.ds.query(
      `SELECT a.status AS approval, t.status AS call, t.error_code,
              (SELECT count(*)::int FROM tool_call_inputs i WHERE i.tool_call_id = t.id) AS inputs,
              (SELECT count(*)::int FROM runtime_ledger_events e WHERE e.tool_call_id = t.id AND e.type = 'tool_call.blocked'
                 AND e.metadata->>'reason' = 'approval_expired') AS expiry_events
         FROM tool_calls t JOIN approval_requests a ON a.tool_call_id = t.id WHERE t.id = $1`,
      [toolCallId],
    )) as { approval: string; call: string; error_code: string | null; inputs: number; expiry_events: number }[];
    return row;
  };

  it('GET …/result answers blocked / APPROVAL_EXPIRED, written down once, and the re-post and the run agree', async () => {
    const w = await waitingRefund();
    advance(61_000);
    expect(await stored(w.toolCallId)).toMatchObject({ approval: 'pending', call: 'waiting_approval', inputs: 1 }); // the sweep has not run

    const result = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result`).set(bearer(w.agentKey));
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ toolCallId: w.toolCallId, status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });
    expect(result.body.toolResult.content).toMatch(/expired/);
    // As the sweep writes it: approval expired, call blocked, raw input dropped, one event.
    expect(await stored(w.toolCallId)).toEqual({ approval: 'expired', call: 'blocked', error_code: 'APPROVAL_EXPIRED', inputs: 0, expiry_events: 1 });

    const repost = await h.t.http.post(`/v1/runs/${w.runId}/tool-calls`).set(bearer(w.agentKey)).send(w.use);
    expect([repost.status, repost.body.errorCode, repost.headers['idempotent-replayed']]).toEqual([403, 'APPROVAL_EXPIRED', 'true']);
    const run = await h.t.http.get(`/v1/runs/${w.runId}`).set(bearer(w.agentKey));
    expect(run.body).toMatchObject({ status: 'running', pendingApprovalCount: 0 });
    const late = await h.t.http.post(`/v1/approvals/${w.approval.id}/decision`).set(bearer(w.expert.key)).send({ decision: 'approve', actionDigest: w.approval.actionDigest });
    expect([late.status, late.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
    expect((await stored(w.toolCallId)).expiry_events).toBe(1);
  });

  it('a re-post of the tool_use, the first to read it, is 403 APPROVAL_EXPIRED, not 202', async () => {
    const w = await waitingRefund();
    advance(61_000);
    const repost = await h.t.http.post(`/v1/runs/${w.runId}/tool-calls`).set(bearer(w.agentKey)).send(w.use);
    expect([repost.status, repost.body.status, repost.body.errorCode]).toEqual([403, 'blocked', 'APPROVAL_EXPIRED']);
    expect(await stored(w.toolCallId)).toMatchObject({ approval: 'expired', call: 'blocked', expiry_events: 1 });
  });

  it('the run, the first to read it, settles its overdue approvals only: not one still in time', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const overdue = await waitingRefund(org, '6.00');
    advance(30_000);
    const inTime = await waitingRefund(org, '7.00');
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 2 });
    advance(31_000); // the first is past its expiry, the second has 29 s left

    const run = await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey));
    expect(run.body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 1 });
    expect(await stored(overdue.toolCallId)).toMatchObject({ approval: 'expired', call: 'blocked', error_code: 'APPROVAL_EXPIRED', expiry_events: 1 });
    expect(await stored(inTime.toolCallId)).toMatchObject({ approval: 'pending', call: 'waiting_approval', expiry_events: 0 });

    advance(30_000);
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body).toMatchObject({ status: 'running', pendingApprovalCount: 0 });
    expect(await stored(inTime.toolCallId)).toMatchObject({ approval: 'expired', call: 'blocked', expiry_events: 1 });
  });

  it('a long-poll answers as soon as the approval expires, not at the next sweep', async () => {
    const w = await waitingRefund();
    const t0 = performance.now();
    const poll = h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result?waitMs=8000`).set(bearer(w.agentKey));
    const answered = poll.then((r) => ({ r, ms: performance.now() - t0 }));
    await new Promise((r) => setTimeout(r, 300));
    advance(61_000); // expires while the poll waits
    const { r, ms } = await answered;
    expect(r.body).toMatchObject({ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });
    expect(ms).toBeLessThan(3_000);
  });

  it('the ops story of the call, the first to read it, shows it blocked and its approval expired, not waiting / pending', async () => {
    const w = await waitingRefund();
    const ops = await createKey(h.t, w.orgId, 'ops');
    advance(61_000);
    const story = await h.t.http.get(`/v1/tool-calls/${w.toolCallId}`).set(bearer(ops.key));
    expect(story.status).toBe(200);
    expect({ call: story.body.status, errorCode: story.body.errorCode, approval: story.body.approval?.status }).toEqual({
      call: 'blocked', errorCode: 'APPROVAL_EXPIRED', approval: 'expired',
    });
    // Written down as the sweep writes it, the event in the story too; GET /v1/approvals/:id agrees.
    expect(await stored(w.toolCallId)).toEqual({ approval: 'expired', call: 'blocked', error_code: 'APPROVAL_EXPIRED', inputs: 0, expiry_events: 1 });
    expect((story.body.events as { type: string }[]).map((e) => e.type)).toContain('tool_call.blocked');
    expect((await h.t.http.get(`/v1/approvals/${w.approval.id}`).set(bearer(ops.key))).body.status).toBe('expired');
  });

  it('an ops listing that could hold the call settles the org\'s overdue approvals first: another org\'s, or another status, does not', async () => {
    const w = await waitingRefund();
    const ops = await createKey(h.t, w.orgId, 'ops');
    const other = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const otherOps = await createKey(h.t, other.orgId, 'ops');
    advance(61_000);
    const list = async (key: string, query: string) => {
      const res = await h.t.http.get(`/v1/tool-calls?${query}`).set(bearer(key));
      expect(res.status).toBe(200);
      return (res.body.items as { id: string; status: string; errorCode: string | null }[]).filter((c) => c.id === w.toolCallId);
    };
    expect(await list(otherOps.key, 'status=waiting_approval')).toEqual([]);
    expect(await list(ops.key, `runId=${w.runId}&status=succeeded`)).toEqual([]);
    expect(await stored(w.toolCallId)).toMatchObject({ approval: 'pending', call: 'waiting_approval' }); // neither settles it

    expect(await list(ops.key, `runId=${w.runId}&status=waiting_approval`)).toEqual([]);
    expect(await list(ops.key, `runId=${w.runId}&status=blocked`)).toMatchObject([{ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' }]);
    expect(await list(ops.key, `runId=${w.runId}`)).toMatchObject([{ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' }]);
    expect(await stored(w.toolCallId)).toEqual({ approval: 'expired', call: 'blocked', error_code: 'APPROVAL_EXPIRED', inputs: 0, expiry_events: 1 });
  });

  it("the ledger's events, the first to read them, show the expiry; a type filter that cannot hold it, or a later page, does not settle it", async () => {
    const w = await waitingRefund(undefined, '2.00');
    const ops = await createKey(h.t, w.orgId, 'ops');
    advance(61_000);
    const events = async (query: string) => {
      const res = await h.t.http.get(`/v1/ledger/events?runId=${w.runId}${query}`).set(bearer(ops.key));
      expect(res.status).toBe(200);
      return res.body as { items: { type: string; toolCallId: string | null; metadata: { reason?: string } }[]; nextCursor: string | null };
    };
    expect((await events('&type=tool_call.requested')).items.map((e) => e.type)).toEqual(['tool_call.requested']);
    expect(await stored(w.toolCallId)).toMatchObject({ approval: 'pending', call: 'waiting_approval' }); // that filter cannot hold it
    const firstTwo = await events('&limit=2');
    expect(await stored(w.toolCallId)).toMatchObject({ approval: 'expired', call: 'blocked', expiry_events: 1 }); // that first page settled it
    const w2 = await waitingRefund(w.org, '2.50');
    advance(61_000);
    await events(`&limit=2&cursor=${encodeURIComponent(firstTwo.nextCursor!)}`);
    expect(await stored(w2.toolCallId)).toMatchObject({ approval: 'pending', call: 'waiting_approval' }); // a later page does not
    const blocked = (await events('&type=tool_call.blocked')).items.filter((e) => e.toolCallId === w2.toolCallId);
    expect(blocked.map((e) => e.metadata.reason)).toEqual(['approval_expired']);
  });

  it('usage, the first to read it, counts the call blocked, as the listing does at the same moment (before: neither blocked nor anything else)', async () => {
    const w = await waitingRefund(undefined, '3.00');
    const ops = await createKey(h.t, w.orgId, 'ops');
    advance(61_000);
    const usage = await h.t.http.get(`/v1/orgs/${w.orgId}/usage`).set(bearer(ops.key));
    // Read first, then the list (which settles the approval): the order matters for what usage saw.
    const listed = await h.t.http.get('/v1/tool-calls').query({ status: 'blocked' }).set(bearer(ops.key));
    expect(listed.body.items.map((i: { errorCode: string }) => i.errorCode)).toEqual(['APPROVAL_EXPIRED']);
    expect(usage.body.byTool).toEqual([{ toolName: 'shopify_refund', action: 'create', calls: 1, succeeded: 0, failed: 0, blocked: 1, costCents: 0 }]);
  });

  it('reads racing each other write the expiry down once, and the sweep after them finds nothing left', async () => {
    const w = await waitingRefund();
    advance(61_000);
    const answers = await Promise.all([
      ...Array.from({ length: 8 }, () => h.t.http.get(`/v1/tool-calls/${w.toolCallId}/result`).set(bearer(w.agentKey))),
      ...Array.from({ length: 4 }, () => h.t.http.post(`/v1/runs/${w.runId}/tool-calls`).set(bearer(w.agentKey)).send(w.use)),
      ...Array.from({ length: 4 }, () => h.t.http.get(`/v1/runs/${w.runId}`).set(bearer(w.agentKey))),
    ]);
    expect(answers.slice(0, 12).map((a) => a.body.errorCode)).toEqual(Array(12).fill('APPROVAL_EXPIRED'));
    expect(await stored(w.toolCallId)).toEqual({ approval: 'expired', call: 'blocked', error_code: 'APPROVAL_EXPIRED', inputs: 0, expiry_events: 1 });
    const [run] = (await h.t.ds.query('SELECT status, pending_approval_count FROM agent_runs WHERE id = $1', [w.runId])) as { status: string; pending_approval_count: number }[];
    expect(run).toEqual({ status: 'running', pending_approval_count: 0 });

    releaseSweep();
    try {
      await h.t.app.get(ApprovedCallRunner).tick();
    } finally {
      releaseSweep = aroundStatements(h.t.app.get(Sql), (text, _params, send) => (isSweepExpiry(text) ? Promise.resolve([]) : send()));
    }
    expect((await stored(w.toolCallId)).expiry_events).toBe(1);
  });
});
