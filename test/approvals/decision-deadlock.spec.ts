import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleApprovalsSql } from '../../src/approvals/approval-settle.sql.js';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { aroundStatements, approvalFor, refundUse, refunds, twoOverdueApprovals } from './support.js';

/** The settle statement of a decision (settleApprovalsSql('by-id')). */
const isSettle = (text: string): boolean => text.includes('UPDATE approval_requests SET') && text.includes("id = $1 AND status = 'pending'");
/** The decision transaction's first statement: the approval's row lock, taken before the clock is read. */
const isSettleLock = (text: string): boolean => text.includes('FROM approval_requests WHERE id = $1 FOR UPDATE');
/** What PostgreSQL answers the transaction it picks as a deadlock's victim (it rolls it back whole). */
const deadlock = (): Error => Object.assign(new Error('deadlock detected'), { code: '40P01' });

/**
 * A decision and a run ending at the same moment may deadlock (each locks the approval and the run);
 * PostgreSQL rolls one back with 40P01. The run end retries on its side; so does the decision: it is
 * settled, or answered 409 APPROVAL_ALREADY_DECIDED when the end won — never a 500. The interleaving
 * cannot be forced from outside, so the settle statement is made to lose one deadlock.
 */
describe('a decision that loses a deadlock', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function pendingApproval(amount: string) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
    expect(res.status).toBe(202);
    const approval = await approvalFor(h, expert.key, res.body.toolCallId);
    return { org, expert, callId: res.body.toolCallId as string, approval };
  }

  it('is settled by its retry: the call runs, once', async () => {
    const { org, expert, callId, approval } = await pendingApproval('2.10');
    const before = refunds(h);
    let deadlocks = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (isSettle(text) && params[0] === approval.id && deadlocks++ === 0) throw deadlock();
      return send();
    });
    try {
      const d = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect([d.status, d.body.status]).toEqual([200, 'approved']);
    } finally {
      undo();
    }
    expect(deadlocks).toBe(2);
    const r = await h.t.http.get(`/v1/tool-calls/${callId}/result?waitMs=5000`).set(bearer(org.agentKey));
    expect(r.body.status).toBe('succeeded');
    expect(refunds(h) - before).toBe(1);
  });

  it('answers 409 APPROVAL_ALREADY_DECIDED when the run end won', async () => {
    const { org, expert, callId, approval } = await pendingApproval('2.11');
    const before = refunds(h);
    let deadlocks = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      // Before the decision's transaction holds anything (its row lock is its first statement): a run end
      // inside the settle statement would wait for that lock, where a real deadlock's victim is rolled back whole.
      if (isSettleLock(text) && params[0] === approval.id && deadlocks++ === 0) {
        // The run's end went through first (it rejected the pending approval); the decision was the victim.
        const ended = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({});
        expect(ended.status).toBe(200);
        throw deadlock();
      }
      return send();
    });
    try {
      const d = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect([d.status, d.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
    } finally {
      undo();
    }
    const r = await h.t.http.get(`/v1/tool-calls/${callId}/result`).set(bearer(org.agentKey));
    expect(r.body).toMatchObject({ status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
    expect(refunds(h)).toBe(before);
  });
});

/** The sweep's expiry statement (settleApprovalsSql('expired')). */
const isSweepExpiry = (text: string): boolean => text.includes('$1::uuid IS NULL') && text.includes('approval_requests');

/**
 * A run's end locks its pending approvals in id order (RunsService.endRun); the expiry sweep settles many in one
 * statement. Locking them in another order, the two could each hold an approval the other waits for: a deadlock.
 */
describe('the expiry sweep beside a run ending', () => {
  let h: Harness;
  let releaseSweep: () => void;
  beforeAll(async () => {
    h = await startHarness();
    // The periodic sweep settles nothing here: the statement below is the only one.
    releaseSweep = aroundStatements(h.t.app.get(Sql), (text, _params, send) => (isSweepExpiry(text) ? Promise.resolve([]) : send()));
  });
  afterAll(async () => {
    releaseSweep?.();
    await h?.close();
  });

  it('locks the approvals it settles in id order, as the run end does', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    // Long overdue (only these two, at the `now` the statement is given), and read by a plan of its own in the other
    // order: `hi` expires first (the pending-expiry index) and, written first, its row version comes first (a table scan).
    const { lo, hi } = await twoOverdueApprovals(h, org, ['2.20', '2.21']);

    const end = h.t.ds.createQueryRunner();
    await end.connect();
    await end.startTransaction();
    try {
      // The run end's first lock (it goes on with `hi`); the sweep starts while it is held.
      await end.query('SELECT id FROM approval_requests WHERE id = $1 FOR UPDATE', [lo]);
      const [{ pid }] = (await end.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[];
      const sweep = h.t.ds.query(settleApprovalsSql('expired'), [null, 'expired', new Date('2000-01-01T00:00:20Z'), null, null, null]) as Promise<{ id: string }[]>;
      const waiting = async () =>
        ((await h.t.ds.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [pid])) as { n: number }[])[0].n;
      for (let i = 0; i < 100 && (await waiting()) === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await waiting()).toBe(1); // the sweep waits for `lo`
      // Not yet holding `hi`: the run end takes it (had the sweep taken it first, each would wait for the other).
      await expect(end.query('SELECT id FROM approval_requests WHERE id = $1 FOR UPDATE NOWAIT', [hi])).resolves.toEqual([{ id: hi }]);
      await end.commitTransaction();
      expect((await sweep).map((r) => r.id).sort()).toEqual([lo, hi]);
    } finally {
      if (end.isTransactionActive) await end.rollbackTransaction();
      await end.release();
    }
  });
});
