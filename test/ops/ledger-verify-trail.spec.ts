import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { verifyOrgChain } from '../../src/ledger/ledger-verifier.service.js';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { approvalFor, refundUse, refunds } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { planNodes } from '../support/query-plan.js';
import { insertCalls, insertRun, insertRunOnLedger } from './ledger-seed.js';

const ALLOW_REFUNDS = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow', riskLevel: 'low', reason: 'ok' }];
const BLOCK_REFUNDS = [{ id: 'no-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'block', riskLevel: 'high', reason: 'fraud incident' }];
const lookup = (orderId = '12345') => toolUse('order_lookup', { action: 'lookup', orderId });

/**
 * GET /v1/ledger/verify checks every tool_calls row against its chained events: not only a settled
 * status against the last settling event, but the whole trail (requested first, each step one the
 * gateway writes, an approval between an approval request and a start), the status it leads to, and
 * the run, tool and action every event names. No legitimate history may report a break; an edit of
 * the row with plain SQL (no trigger bypass) must.
 */
describe('ledger verify: tool calls against their event trail', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = async (orgId: string) => (await h.t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as Record<string, unknown>;
  const post = (org: OrgSetup, use: object) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
  const trail = async (id: string) =>
    ((await h.t.ds.query('SELECT type FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [id])) as { type: string }[]).map((e) => e.type.slice('tool_call.'.length));
  const eventOf = async (id: string, type: string) =>
    ((await h.t.ds.query('SELECT id FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = $2 ORDER BY seq DESC LIMIT 1', [id, `tool_call.${type}`])) as { id: string }[])[0].id;

  /** A refund waiting for an expert (the default policy for a high-risk action), with its approval. */
  async function waitingRefund(org?: OrgSetup) {
    const o = org ?? (await setupOrg(h.t, { tools: ['shopify_refund.create'] }));
    const expert = await createKey(h.t, o.orgId, 'expert');
    const res = await post(o, refundUse('1.00'));
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);
    const decide = async (decision: 'approve' | 'reject') => {
      const r = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision, actionDigest: approval.actionDigest });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    };
    const settled = async () => (await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=8000`).set(bearer(o.agentKey))).body as { status: string; errorCode: string | null };
    return { org: o, id, decide, settled };
  }

  describe('every history the gateway writes verifies ok', () => {
    it('submit paths: allowed, retried, failed at the vendor, blocked (policy, manifest, unknown tool or action), invalid input, waiting, indeterminate, batch', async () => {
      const rules = [{ id: 'no-products', match: { toolName: 'shopify_query.get_product' }, decision: 'block', reason: 'not today' }];
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_query.get_product', 'shopify_order.add_note', 'shopify_refund.create'], rules });
      const calls: [string, string[]][] = [];
      const call = async (what: string, use: object, status: string) => {
        const res = await post(org, use);
        expect(res.body.status, `${what}: ${JSON.stringify(res.body)}`).toBe(status);
        calls.push([what, await trail(res.body.toolCallId as string)]);
        return res.body.toolCallId as string;
      };
      await call('allowed', lookup(), 'succeeded');
      h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'status', status: 503 });
      await call('retried', lookup(), 'succeeded');
      h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'status', status: 401 });
      await call('failed at the vendor', lookup(), 'failed');
      await call('blocked by policy', toolUse('shopify_query', { action: 'get_product', productId: '1' }), 'blocked');
      await call('not in the manifest', toolUse('amazon_query', { action: 'get_order', orderId: '1' }), 'blocked');
      const unknown = await call('unknown tool, recorded redacted', toolUse('4111111111111111', { action: 'x' }), 'blocked');
      const [row] = (await h.t.ds.query('SELECT tool_name FROM tool_calls WHERE id = $1', [unknown])) as { tool_name: string }[];
      expect(row.tool_name).not.toBe('4111111111111111');
      await call('unknown action', toolUse('order_lookup', { action: 'lookupp', orderId: '1' }), 'blocked');
      await call('invalid input', toolUse('order_lookup', { action: 'lookup' }), 'failed');
      await call('waiting for an expert', refundUse('1.00'), 'waiting_approval');
      h.emu.fault({ vendor: 'shopify', kind: 'reset_after' });
      await call('answer lost', toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'n' }), 'indeterminate');
      expect(calls).toEqual([
        ['allowed', ['requested', 'started', 'succeeded']],
        ['retried', ['requested', 'started', 'retried', 'succeeded']],
        ['failed at the vendor', ['requested', 'started', 'failed']],
        ['blocked by policy', ['requested', 'blocked']],
        ['not in the manifest', ['requested', 'blocked']],
        ['unknown tool, recorded redacted', ['requested', 'blocked']],
        ['unknown action', ['requested', 'blocked']],
        ['invalid input', ['requested', 'failed']],
        ['waiting for an expert', ['requested', 'approval_requested']],
        ['answer lost', ['requested', 'started', 'indeterminate']],
      ]);
      const batch = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({
        toolUses: [lookup(), refundUse('2.00'), toolUse('order_lookup', { action: 'lookup' })],
      });
      expect(batch.status, JSON.stringify(batch.body)).toBe(200);
      expect((batch.body.results as { status: string }[]).map((r) => r.status)).toEqual(['succeeded', 'waiting_approval', 'failed']);
      expect(await verify(org.orgId)).toMatchObject({ ok: true });

      const off = await setupOrg(h.t, { tools: ['order_lookup.lookup'], flag: false });
      expect((await post(off, lookup())).body).toMatchObject({ status: 'blocked', errorCode: 'FEATURE_DISABLED' });
      expect(await verify(off.orgId)).toMatchObject({ ok: true });
    });

    it('approvals: approved and run, rejected, expired, and blocked after approval by the flag or the policy', async () => {
      const approved = await waitingRefund();
      await approved.decide('approve');
      expect(await approved.settled()).toMatchObject({ status: 'succeeded' });
      expect(await trail(approved.id)).toEqual(['requested', 'approval_requested', 'approved', 'started', 'succeeded']);

      const rejected = await waitingRefund();
      await rejected.decide('reject');
      expect(await rejected.settled()).toMatchObject({ status: 'blocked', errorCode: 'EXPERT_REJECTED' });

      const expired = await waitingRefund();
      const clock = h.t.app.get(Clock);
      clock.advance(3_601_000);
      try {
        await h.t.app.get(ApprovedCallRunner).sweep();
      } finally {
        clock.advance(-3_601_000);
      }
      expect(await expired.settled()).toMatchObject({ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });

      const flagged = await waitingRefund();
      expect((await h.t.http.put(`/v1/orgs/${flagged.org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false })).status).toBe(200);
      await flagged.decide('approve');
      expect(await flagged.settled()).toMatchObject({ status: 'blocked', errorCode: 'FEATURE_DISABLED' });

      const policed = await waitingRefund();
      expect((await h.t.http.put(`/v1/orgs/${policed.org.orgId}/policies`).set(adminAuth).send({ rules: BLOCK_REFUNDS })).status).toBe(200);
      await policed.decide('approve');
      expect(await policed.settled()).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });

      for (const w of [rejected, expired, flagged, policed]) {
        expect(await trail(w.id)).toEqual(w === rejected || w === expired ? ['requested', 'approval_requested', 'blocked'] : ['requested', 'approval_requested', 'approved', 'blocked']);
      }
      for (const w of [approved, rejected, expired, flagged, policed]) expect(await verify(w.org.orgId), w.id).toMatchObject({ ok: true });
    });

    it('a run ending blocks the calls it leaves waiting or approved', async () => {
      const waiting = await waitingRefund();
      const approved = await waitingRefund(waiting.org);
      const calls = h.t.app.get(ToolCallsService);
      const held: (() => void)[] = [];
      for (let r = calls.leaseFor(waiting.org.orgId, 'shopify'); r; r = calls.leaseFor(waiting.org.orgId, 'shopify')) held.push(r);
      try {
        // No slot free: the approved call waits, approved, until the run's end blocks it.
        await approved.decide('approve');
        await waitFor(() => h.t.logs.some((l) => l.includes('approved call deferred') && l.includes(approved.id)), 'the approved call deferred');
        expect((await h.t.http.post(`/v1/runs/${waiting.org.runId}/cancel`).set(bearer(waiting.org.agentKey)).send({})).status).toBe(200);
      } finally {
        for (const r of held) r();
      }
      expect(await trail(waiting.id)).toEqual(['requested', 'approval_requested', 'blocked']);
      expect(await trail(approved.id)).toEqual(['requested', 'approval_requested', 'approved', 'blocked']);
      expect(await verify(waiting.org.orgId)).toMatchObject({ ok: true });
    });

    it('the orphan sweep, the vendor’s answer after it, and a reconcile before or after that answer', async () => {
      for (const reconcileFirst of [false, true]) {
        const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
        const ops = await createKey(h.t, org.orgId, 'ops');
        const reconcile = async (id: string) =>
          expect((await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops.key)).send({ status: 'succeeded', note: 'seen at the vendor' })).status).toBe(200);
        const seen = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
        h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'delay', delayMs: 800 });
        const sent = post(org, lookup()).then((r) => r);
        await waitFor(() => h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) > seen, 'the lookup at the vendor');
        const [[{ id }]] = (await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE run_id = $1 RETURNING id`, [org.runId])) as [{ id: string }[], number];
        expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
        if (reconcileFirst) await reconcile(id);
        await sent;
        if (!reconcileFirst) await reconcile(id);
        expect(await trail(id)).toEqual(
          reconcileFirst
            ? ['requested', 'started', 'indeterminate', 'reconciled', 'outcome_after_sweep']
            : ['requested', 'started', 'indeterminate', 'outcome_after_sweep', 'reconciled'],
        );
        expect(await verify(org.orgId)).toMatchObject({ ok: true });
      }
    });

    it('a reconcile recorded by releases before its event carried an error code (upgraded data) verifies ok; an edited code still breaks', async () => {
      const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
      const lost = async () => {
        h.emu.fault({ vendor: 'shopify', kind: 'reset_after' });
        const res = await post(org, toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'n' }));
        expect(res.body.status, JSON.stringify(res.body)).toBe('indeterminate');
        return res.body.toolCallId as string;
      };
      const [failed, succeeded] = [await lost(), await lost()];
      const [{ error_code: before }] = (await h.t.ds.query('SELECT error_code FROM tool_calls WHERE id = $1', [failed])) as { error_code: string }[];
      expect(before).not.toBeNull();
      // The reconcile statement as it was before 2b2c169: a failed call kept its code, and the event named none.
      for (const [id, to] of [[failed, 'failed'], [succeeded, 'succeeded']]) {
        await h.t.ds.query(
          `WITH tc AS (
             UPDATE tool_calls SET status = $2, note = 'checked', updated_at = now(), finished_at = coalesce(finished_at, now()),
                    error_code = CASE WHEN $2 = 'succeeded' THEN NULL ELSE error_code END
              WHERE id = $1 AND status = 'indeterminate'
              RETURNING id, org_id, run_id, tool_name, action, action_digest)
           INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
           SELECT gen_random_uuid(), org_id, 'tool_call.reconciled', run_id, id, '{}'::jsonb,
                  jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'from', 'indeterminate', 'to', $2::text)
             FROM tc`,
          [id, to],
        );
      }
      expect(await trail(failed)).toEqual(['requested', 'started', 'indeterminate', 'reconciled']);
      expect(await verify(org.orgId)).toMatchObject({ ok: true });
      await h.t.ds.query(`UPDATE tool_calls SET error_code = 'VENDOR_ERROR' WHERE id = $1`, [failed]);
      expect(await verify(org.orgId)).toMatchObject({
        ok: false,
        brokenAt: { eventId: await eventOf(failed, 'reconciled'), reason: `tool call ${failed}: its error code differs from its last settling event's` },
      });
      await h.t.ds.query(`UPDATE tool_calls SET error_code = $2 WHERE id = $1`, [failed, before]);
      await h.t.ds.query(`UPDATE tool_calls SET error_code = 'VENDOR_ERROR' WHERE id = $1`, [succeeded]);
      expect(await verify(org.orgId)).toMatchObject({ ok: false, brokenAt: { eventId: await eventOf(succeeded, 'reconciled') } });
    });
  });

  describe('an edit of the row is a break', () => {
    it('a waiting refund set to approved with SQL: a break at once, and after the approvals sweep ran it with no approval on the ledger', async () => {
      const w = await waitingRefund();
      const requested = await eventOf(w.id, 'approval_requested');
      await h.t.ds.query(`UPDATE tool_calls SET status = 'approved' WHERE id = $1`, [w.id]);
      expect(await verify(w.org.orgId)).toMatchObject({
        ok: false,
        brokenAt: { eventId: requested, reason: `tool call ${w.id} is approved, but its last event (tool_call.approval_requested) says waiting_approval` },
      });

      const before = refunds(h);
      await h.t.app.get(ApprovedCallRunner).sweep();
      expect(await w.settled()).toMatchObject({ status: 'succeeded' });
      expect(refunds(h)).toBe(before + 1);
      expect(await trail(w.id)).toEqual(['requested', 'approval_requested', 'started', 'succeeded']);
      expect(await verify(w.org.orgId)).toMatchObject({
        ok: false,
        brokenAt: { eventId: await eventOf(w.id, 'started'), reason: `tool call ${w.id} started after an approval request, with no approval on the ledger` },
      });
    });

    it.each([
      ['set running', `status = 'running'`, 'is running, but its last event (tool_call.approval_requested) says waiting_approval'],
      ['set blocked', `status = 'blocked', error_code = 'EXPERT_REJECTED'`, 'is blocked, but no event in the ledger settled it'],
      ['given an error code', `error_code = 'EXPERT_REJECTED'`, "its error code differs from its last event's"],
    ])('a waiting call %s is a break', async (_what, set, reason) => {
      const w = await waitingRefund();
      await h.t.ds.query(`UPDATE tool_calls SET ${set} WHERE id = $1`, [w.id]);
      const body = await verify(w.org.orgId);
      expect(body).toMatchObject({ ok: false });
      expect((body.brokenAt as { reason: string }).reason).toBe(`tool call ${w.id}${reason.startsWith('is') ? ' ' : ': '}${reason}`);
    });

    it.each([
      ['relabelled as an order lookup', `tool_name = 'order_lookup', action = 'lookup', cost_cents = 0`, 'tool name'],
      ['given another action', `action = 'preview'`, 'action'],
      ['moved to another run', 'run_id = $2', 'run'],
    ])('a succeeded refund %s is a break at its last event that disagrees', async (_what, set, field) => {
      const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: ALLOW_REFUNDS });
      const res = await post(org, refundUse('3.00'));
      expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
      const id = res.body.toolCallId as string;
      expect(await verify(org.orgId)).toMatchObject({ ok: true });
      const other = (await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support' })).body.id as string;
      await h.t.ds.query(`UPDATE tool_calls SET ${set} WHERE id = $1${set.includes('$2') ? '' : ' AND $2::uuid IS NOT NULL'}`, [id, other]);
      expect(await verify(org.orgId)).toMatchObject({
        ok: false,
        brokenAt: { eventId: await eventOf(id, 'succeeded'), reason: `tool call ${id}: its ${field} differs from its events'` },
      });
    });

    it('a note on a call no reconcile settled is a break (the agent would be told an operator checked it)', async () => {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
      const id = (await post(org, lookup())).body.toolCallId as string;
      await h.t.ds.query(`UPDATE tool_calls SET note = 'checked with the vendor' WHERE id = $1`, [id]);
      expect(await verify(org.orgId)).toMatchObject({
        ok: false,
        brokenAt: { eventId: await eventOf(id, 'succeeded'), reason: `tool call ${id} has a reconcile note, but no reconcile on the ledger` },
      });
    });

    it('a call inserted around the gateway, not settled and with no events, is a break', async () => {
      const org = await createOrg(h.t, 'Row only');
      const [call] = await insertCalls(h.t.ds, [{ orgId: org, runId: await insertRun(h.t.ds, org), status: 'waiting_approval' }]);
      expect(await verify(org)).toMatchObject({
        ok: false,
        brokenAt: { chainSeq: 0, eventId: null, reason: `tool call ${call.id} has no tool_call.requested event in the ledger` },
      });
    });
  });

  it('pages calls by created_at with its era: 5,000 rows moved to BC (plain SQL) do not hide a later call rewritten as succeeded', async () => {
    const org = await createOrg(h.t, 'Era paging');
    const run = await insertRunOnLedger(h.t.ds, org);
    const calls = await insertCalls(h.t.ds, Array.from({ length: 5_001 }, () => ({ orgId: org, runId: run, status: 'running', durationMs: null })));
    const facts = { toolName: 'order_lookup', action: 'lookup', digest: 'ab'.repeat(32) };
    // Every call but one about 5,026 years back, in 3001 BC, its events with it (verify holds a row's created_at to its
    // tool_call.requested event's) …
    const target = calls[calls.length - 1].id;
    await h.t.ds.query(`UPDATE tool_calls SET created_at = created_at - interval '5026 years' WHERE org_id = $1 AND id <> $2`, [org, target]);
    await h.t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata, created_at)
       SELECT gen_random_uuid(), t.org_id, k.type, t.run_id, t.id, $2::jsonb, t.created_at + k.after
         FROM tool_calls t CROSS JOIN (VALUES ('tool_call.requested', interval '1 ms'), ('tool_call.started', interval '2 ms')) AS k(type, after)
        WHERE t.org_id = $1 ORDER BY t.created_at, k.after`,
      [org, JSON.stringify(facts)],
    );
    await h.t.ds.query('ANALYZE tool_calls, runtime_ledger_events'); // the statistics a database this size has (autovacuum)
    expect(await verify(org)).toMatchObject({ ok: true });
    // … and the one left, with the app's own rights (no trigger bypass), rewritten as succeeded. The check's first
    // page (5,000 rows) ends on a BC row: read without its era, page 2 started after 3001 AD and never reached this call.
    await h.t.ds.query(`UPDATE tool_calls SET status = 'succeeded' WHERE id = $1`, [target]);
    expect(await verify(org)).toMatchObject({
      ok: false,
      brokenAt: { chainSeq: 0, eventId: null, reason: `tool call ${target} is succeeded, but no event in the ledger settled it` },
    });
  }, 120_000);

  it('reads each call’s events through ledger_events_call_idx, once per call: linear in the org’s calls', async () => {
    const org = await createOrg(h.t, 'Planned calls');
    const run = await insertRunOnLedger(h.t.ds, org);
    const CALLS = 2_000;
    const calls = await insertCalls(h.t.ds, Array.from({ length: CALLS }, () => ({ orgId: org, runId: run, status: 'succeeded' })));
    const facts = { toolName: 'order_lookup', action: 'lookup', digest: 'ab'.repeat(32) };
    await h.t.app.get(LedgerEventsService).append(
      calls.flatMap((c) => ['requested', 'started', 'succeeded'].map((s) => ({ orgId: org, type: `tool_call.${s}`, runId: run, toolCallId: c.id, metadata: { ...facts, errorCode: null, durationMs: 42 } }))),
    );
    await h.t.app.get(LedgerSealerService).sealNow();
    await h.t.ds.query('ANALYZE runtime_ledger_events');
    await h.t.ds.query('ANALYZE tool_calls');
    const statements: { sql: string; params: unknown[] }[] = [];
    const result = await verifyOrgChain({ query: (sql, params) => (statements.push({ sql, params }), h.t.ds.query(sql, params)) }, org);
    expect(result).toMatchObject({ ok: true });
    const [{ sql, params }] = statements.filter((s) => s.sql.includes('FROM tool_calls t'));
    const plan = await planNodes(h.t.ds, sql, params, { analyze: true });
    const scans = plan.filter((n) => n['Relation Name'] === 'runtime_ledger_events' || n['Index Name']);
    expect(scans.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
    // One index read per call, returning that call's events only (the index may also hold dead entries of sealed rows).
    const read = plan.filter((n) => n['Index Name'] === 'ledger_events_call_idx');
    expect(read.map((n) => n['Actual Loops'])).toEqual([CALLS]);
    const [heap] = scans.filter((n) => n['Relation Name'] === 'runtime_ledger_events');
    expect(heap['Actual Rows']! * heap['Actual Loops']!).toBe(3 * CALLS);
  }, 60_000);
});
