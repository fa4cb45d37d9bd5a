import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

const EXPIRED_MSG = 'approval expired undecided: the call is blocked APPROVAL_EXPIRED';

interface ExpiryLine { level: number; msg: string; toolCallId: string; approvalId: string; orgId: string; tool: string; action: string; kind: string }

/**
 * An approval queue nobody works must show outside the ledger: each expiry written is one info line naming the call
 * (ids, tool and action; never its input) and one increment of approvals_expired_total, however many passes,
 * replicas or reads race to write it.
 */
describe('an approval expiring undecided is logged and counted, once', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '60' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const expiredTotal = async (kind: string): Promise<number> => {
    const text = (await h.t.http.get('/metrics')).text as string;
    return Number(new RegExp(`^approvals_expired_total\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  };
  const expiryLines = (from: number): { line: ExpiryLine; text: string }[] =>
    h.t.logs
      .slice(from)
      .flatMap((chunk) => chunk.split('\n'))
      .filter((text) => text.includes(EXPIRED_MSG))
      .map((text) => ({ line: JSON.parse(text) as ExpiryLine, text }));
  /** Refunds of a fresh org waiting for an expert, each with an amount no other field holds. */
  const waitingRefunds = async (amounts: string[]) => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const ids: string[] = [];
    for (const amount of amounts) {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount, '73195'));
      expect(res.status).toBe(202);
      ids.push(res.body.toolCallId as string);
    }
    return { org, expert, ids };
  };
  const pastExpiry = async <T>(act: () => Promise<T>): Promise<T> => {
    const clock = h.t.app.get(Clock);
    clock.advance(61_000);
    try {
      return await act();
    } finally {
      clock.advance(-61_000);
    }
  };

  it('sweeps racing each other: one line per expired call, with its ids, tool and action, and the counter moves by as many', async () => {
    const { org, ids } = await waitingRefunds(['4.37', '5.41', '6.59']);
    const before = await expiredTotal('expert');
    const from = h.t.logs.length;
    const runner = h.t.app.get(ApprovedCallRunner);
    await pastExpiry(() => Promise.all([runner.sweep(), runner.sweep(1), runner.sweep()]));
    const rows = (await h.t.ds.query('SELECT id, status, error_code FROM tool_calls WHERE id = ANY($1::uuid[])', [ids])) as { status: string; error_code: string }[];
    expect(rows.map((r) => [r.status, r.error_code])).toEqual(ids.map(() => ['blocked', 'APPROVAL_EXPIRED']));

    const lines = expiryLines(from);
    const approvals = (await h.t.ds.query('SELECT id, tool_call_id FROM approval_requests WHERE tool_call_id = ANY($1::uuid[])', [ids])) as { id: string; tool_call_id: string }[];
    for (const id of ids) {
      const mine = lines.filter(({ line }) => line.toolCallId === id);
      expect(mine.map(({ line }) => line)).toEqual([
        expect.objectContaining({
          level: 30, toolCallId: id, approvalId: approvals.find((a) => a.tool_call_id === id)!.id,
          orgId: org.orgId, tool: 'shopify_refund', action: 'create', kind: 'expert',
        }),
      ]);
      expect(mine[0].text).not.toMatch(/73195|4\.37|5\.41|6\.59/); // no input
    }
    // Every expiry written meanwhile (the periodic pass's, an earlier file's overdue approvals) is one line and one increment.
    expect((await expiredTotal('expert')) - before).toBe(lines.filter(({ line }) => line.kind === 'expert').length);

    const again = h.t.logs.length;
    await pastExpiry(() => runner.sweep());
    expect(expiryLines(again).filter(({ line }) => ids.includes(line.toolCallId))).toEqual([]);
  });

  it('a decision that finds the approval past its expiry writes the expiry: logged and counted once, not again by the sweep', async () => {
    const { expert, ids } = await waitingRefunds(['7.13']);
    const approval = await approvalFor(h, expert.key, ids[0]);
    const before = await expiredTotal('expert');
    const from = h.t.logs.length;
    await pastExpiry(async () => {
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect([decided.status, decided.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
      await h.t.app.get(ApprovedCallRunner).sweep();
    });
    const lines = expiryLines(from);
    expect(lines.filter(({ line }) => line.toolCallId === ids[0]).map(({ line }) => line.approvalId)).toEqual([approval.id]);
    expect((await expiredTotal('expert')) - before).toBe(lines.filter(({ line }) => line.kind === 'expert').length);
  });

  it('a decision in time is no expiry: neither logged nor counted as one', async () => {
    const { expert, ids } = await waitingRefunds(['9.31']);
    const approval = await approvalFor(h, expert.key, ids[0]);
    const before = await expiredTotal('expert');
    const from = h.t.logs.length;
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const lines = expiryLines(from);
    expect(lines.filter(({ line }) => line.toolCallId === ids[0])).toEqual([]);
    expect((await expiredTotal('expert')) - before).toBe(lines.filter(({ line }) => line.kind === 'expert').length);
  });

  it.each([
    ['the agent reading its result', (h: Harness, w: Awaited<ReturnType<typeof waitingRefunds>>) => h.t.http.get(`/v1/tool-calls/${w.ids[0]}/result`).set(bearer(w.org.agentKey))],
    ['the run read', (h: Harness, w: Awaited<ReturnType<typeof waitingRefunds>>) => h.t.http.get(`/v1/runs/${w.org.runId}`).set(bearer(w.org.agentKey))],
    ['an ops listing of the org', (h: Harness, w: Awaited<ReturnType<typeof waitingRefunds>>) => h.t.http.get('/v1/tool-calls').set(bearer(w.org.adminKey))],
  ])('a read that writes the expiry first (%s) logs and counts it as the sweep would', async (_, read) => {
    const w = await waitingRefunds(['8.27']);
    const before = await expiredTotal('expert');
    const from = h.t.logs.length;
    await pastExpiry(async () => {
      expect((await read(h, w)).status).toBe(200);
    });
    const [row] = (await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE id = $1', [w.ids[0]])) as { status: string; error_code: string }[];
    expect([row.status, row.error_code]).toEqual(['blocked', 'APPROVAL_EXPIRED']);
    const lines = expiryLines(from);
    expect(lines.filter(({ line }) => line.toolCallId === w.ids[0]).map(({ line }) => line.orgId)).toEqual([w.org.orgId]);
    expect((await expiredTotal('expert')) - before).toBe(lines.filter(({ line }) => line.kind === 'expert').length);
  });
});
