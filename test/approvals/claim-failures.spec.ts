import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { Sql } from '../../src/db/sql.js';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { aroundStatements, approvalFor, connectionLost, isClaim, refundUse, refunds } from './support.js';

/**
 * The claim of an approved call (approved → running, tool_call.started) commits before the vendor is
 * called. A failure between the two must not leave the call `running` for the orphan sweep to call
 * indeterminate ("the request may have reached the vendor") when nothing was sent: the call runs (a
 * claim whose answer was lost is resumed, once) or ends failed / EXECUTION_ERROR, not executed.
 */
describe('approved calls: failures around the claim', () => {
  let h: Harness;
  const VENDOR_TIMEOUT_MS = 1_000;
  beforeAll(async () => {
    // No margin: the orphan sweep takes any call running longer than the vendor timeout.
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', VENDOR_TIMEOUT_MS: String(VENDOR_TIMEOUT_MS), STALE_RUNNING_MARGIN_MS: '0' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function approvedLater(amount: string) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
    expect(res.status).toBe(202);
    const callId = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, callId);
    const approve = async () => {
      const d = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect(d.status).toBe(200);
    };
    const result = async (waitMs = 0) => (await h.t.http.get(`/v1/tool-calls/${callId}/result?waitMs=${waitMs}`).set(bearer(org.agentKey))).body;
    const events = async (type: string) =>
      ((await h.t.ds.query('SELECT count(*)::int AS n FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = $2', [callId, type])) as { n: number }[])[0]!.n;
    return { callId, approve, result, events };
  }

  /** Past the vendor timeout (no margin), then the orphan sweep: a call still running now would be made indeterminate. */
  async function afterOrphanSweep(): Promise<void> {
    await new Promise((r) => setTimeout(r, VENDOR_TIMEOUT_MS + 200));
    await h.t.app.get(OrphanSweeperService).sweep();
  }

  it('a database error on the first statement after the claim that touches the call: it still runs, once', async () => {
    const call = await approvedLater('2.01');
    const before = refunds(h);
    let claimed = false;
    let failed: string | undefined;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      // More than the id alone: not the long-poll's own read of the call. Nor the order's refund lease, which names the
      // call as its holder (a lease not taken sends nothing: shopify-refund-lease-lost-answer.spec).
      if (claimed && !failed && params.length > 1 && params.includes(call.callId) && !text.includes('shopify_refund_leases')) {
        failed = text.trim().slice(0, 60);
        throw connectionLost();
      }
      const rows = await send();
      if (isClaim(text) && params[0] === call.callId) claimed = true;
      return rows;
    });
    try {
      await call.approve();
      const r = await call.result(5_000);
      expect(r.status).not.toBe('running');
    } finally {
      undo();
    }
    expect(failed).toBeDefined();
    await afterOrphanSweep();
    const r = await call.result();
    expect([r.status, r.errorCode]).toEqual(['succeeded', null]);
    expect(refunds(h) - before).toBe(1);
    expect(await call.events('tool_call.started')).toBe(1);
  });

  it("the claim's answer lost after it committed: the resend finds the claim its own and the call runs, once", async () => {
    const call = await approvedLater('2.02');
    const before = refunds(h);
    let lost = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      const rows = await send();
      if (isClaim(text) && params[0] === call.callId && lost++ === 0) throw connectionLost(); // committed, answer lost
      return rows;
    });
    try {
      await call.approve();
      const r = await call.result(5_000);
      expect(r.status).toBe('succeeded');
    } finally {
      undo();
    }
    expect(lost).toBe(2); // the first attempt and its resend
    await afterOrphanSweep();
    expect((await call.result()).status).toBe('succeeded');
    expect(refunds(h) - before).toBe(1);
    expect(await call.events('tool_call.started')).toBe(1);
    expect(await call.events('tool_call.succeeded')).toBe(1);
  });

  it('the claim refused before it reached the database: the resend claims it afresh and the call runs, once', async () => {
    const call = await approvedLater('2.03');
    const before = refunds(h);
    let refused = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (isClaim(text) && params[0] === call.callId && refused++ === 0) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      return send();
    });
    try {
      await call.approve();
      expect((await call.result(3_000)).status).toBe('succeeded'); // not left approved for the next pass (5 s)
    } finally {
      undo();
    }
    expect(refunds(h) - before).toBe(1);
    expect(await call.events('tool_call.started')).toBe(1);
  });

  it('a resend never takes over a claim someone else won meanwhile: nothing is sent a second time', async () => {
    const call = await approvedLater('2.04');
    const before = refunds(h);
    let attempts = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (!isClaim(text) || params[0] !== call.callId || attempts++ > 0) return send();
      // Our first attempt never arrives; another claimer (its own claim token) wins the call.
      const other = [...params];
      other[2] = randomUUID();
      await h.t.ds.query(text, other);
      throw connectionLost();
    });
    try {
      await call.approve();
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      undo();
    }
    expect(attempts).toBe(2);
    const [row] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [call.callId])) as { status: string }[];
    expect(row!.status).toBe('running'); // the other claimer's; this process did not execute it
    expect(refunds(h)).toBe(before);
    expect(await call.events('tool_call.started')).toBe(1);
  });

  it('an approved input that cannot be decrypted: failed / EXECUTION_ERROR, not executed, never indeterminate', async () => {
    const call = await approvedLater('2.05');
    const before = refunds(h);
    const cipher = h.t.app.get(EnvelopeCipher);
    const decryptJson = cipher.decryptJson.bind(cipher);
    cipher.decryptJson = () => {
      throw new Error('unsupported state or unable to authenticate data');
    };
    try {
      await call.approve();
      const r = await call.result(5_000);
      expect([r.status, r.errorCode]).toEqual(['failed', 'EXECUTION_ERROR']);
    } finally {
      cipher.decryptJson = decryptJson;
    }
    await afterOrphanSweep();
    expect((await call.result()).status).toBe('failed');
    expect(refunds(h)).toBe(before);
    const [input] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_inputs WHERE tool_call_id = $1', [call.callId])) as { n: number }[];
    expect(input!.n).toBe(0);
  });

  it('while its claim is being resent, the call is not started a second time by this process', async () => {
    const call = await approvedLater('2.06');
    const before = refunds(h);
    let lost = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (isClaim(text) && params[0] === call.callId && lost++ === 0) {
        await h.t.app.get(ApprovedCallRunner).run(call.callId); // as a sweep would, while the claim is out
        throw connectionLost();
      }
      return send();
    });
    try {
      await call.approve();
      expect((await call.result(5_000)).status).toBe('succeeded');
    } finally {
      undo();
    }
    expect(refunds(h) - before).toBe(1);
  });
});
