import { expect } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import type { PoolClient } from 'pg';
import type { Sql } from '../../src/db/sql.js';
import type { Harness } from '../support/scenario.js';
import { setupOrg, toolUse } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

export const refundUse = (amount = '1.00', orderId = '12345') => toolUse('shopify_refund', { action: 'create', orderId, amount });

/**
 * Two refunds of the run waiting for approval, their approvals long overdue (only these two, at a `now` after 2000)
 * and `hi` (the higher id) expiring first: a plan reading by expiry (the pending-expiry index) meets them in the
 * order opposite to the id order a run end locks them in.
 */
export async function twoOverdueApprovals(h: Harness, org: { runId: string; agentKey: string }, amounts: [string, string]): Promise<{ lo: string; hi: string }> {
  const callIds: string[] = [];
  for (const amount of amounts) {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
    if (res.status !== 202) throw new Error(`expected 202 waiting for approval, got ${res.status}`);
    callIds.push(res.body.toolCallId as string);
  }
  const [lo, hi] = ((await h.t.ds.query('SELECT id FROM approval_requests WHERE tool_call_id = ANY($1::uuid[]) ORDER BY id', [callIds])) as { id: string }[]).map((r) => r.id);
  await h.t.ds.query(`UPDATE approval_requests SET expires_at = '2000-01-01T00:00:00Z' WHERE id = $1`, [hi]);
  await h.t.ds.query(`UPDATE approval_requests SET expires_at = '2000-01-01T00:00:10Z' WHERE id = $1`, [lo]);
  return { lo, hi };
}

export const refunds = (h: Harness, orderId = '12345'): number => h.emu.vendor<ShopifyEmulator>('shopify').refundCount(orderId);

/**
 * A refund of the org's run sent to wait for an expert (202), decided by `expertKey` (200), and the call's answer once
 * settled (long-polled): the approved call has run, or the rejected one is blocked.
 */
export async function decidedRefund(
  h: Harness,
  org: { runId: string; agentKey: string },
  expertKey: string,
  amount: string,
  decision: 'approve' | 'reject',
): Promise<{ id: string; approval: { id: string; actionDigest: string }; settled: { status: string } }> {
  const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  const id = res.body.toolCallId as string;
  const approval = await approvalFor(h, expertKey, id);
  const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expertKey)).send({ decision, actionDigest: approval.actionDigest });
  expect(decided.status, JSON.stringify(decided.body)).toBe(200);
  const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=8000`).set(bearer(org.agentKey));
  return { id, approval, settled: settled.body as { status: string } };
}

export async function approvalFor(h: Harness, key: string, toolCallId: string): Promise<{ id: string; actionDigest: string; kind: string; status: string }> {
  const res = await h.t.http.get('/v1/approvals?status=pending').set(bearer(key));
  const found = (res.body.items as { id: string; toolCallId: string; actionDigest: string; kind: string; status: string }[]).find(
    (a) => a.toolCallId === toolCallId,
  );
  if (!found) throw new Error(`no pending approval for ${toolCallId}: ${JSON.stringify(res.body)}`);
  return found;
}

type Statement = (text: string, params: unknown[]) => Promise<unknown[]>;
type Transaction = <T>(fn: (client: PoolClient) => Promise<T>) => Promise<T>;

/**
 * Puts `around` between the app's statements (Sql.query, Sql.prepared and those in Sql.transaction) and the database — to fail one
 * the way a database blip or a lost answer does, or act at a chosen moment. The database itself is real.
 * Returns the undo.
 */
export function aroundStatements(sql: Sql, around: (text: string, params: unknown[], send: () => Promise<unknown[]>) => Promise<unknown[]>): () => void {
  const target = sql as unknown as { query: Statement; prepared: Statement; transaction: Transaction };
  const query = target.query;
  const prepared = target.prepared;
  const transaction = target.transaction;
  target.query = (text, params = []) => around(text, params, () => query.call(sql, text, params));
  target.prepared = (text, params = []) => around(text, params, () => prepared.call(sql, text, params));
  // Statements inside Sql.transaction too: its client's text-and-values queries pass through `around`.
  target.transaction = <T>(fn: (client: PoolClient) => Promise<T>): Promise<T> =>
    transaction.call(sql, (client: PoolClient) => {
      const send = (text: string, params: unknown[] = []) => client.query(text, params).then((r) => r.rows as unknown[]);
      const wrapped = new Proxy(client, {
        get: (c, name, receiver) =>
          name === 'query'
            ? (text: unknown, params?: unknown[]) =>
                typeof text === 'string' ? around(text, params ?? [], () => send(text, params)).then((rows) => ({ rows, rowCount: rows.length })) : c.query(text as never)
            : Reflect.get(c, name, receiver),
      });
      return fn(wrapped);
    }) as Promise<T>;
  return () => {
    target.query = query;
    target.prepared = prepared;
    target.transaction = transaction;
  };
}

/** An error as pg reports a connection the server dropped (isDatabaseUnavailable). */
export const connectionLost = (): Error => Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' });

/** The statement that claims an approved call (approved → running, tool_call.started). */
export const isClaim = (text: string): boolean => text.includes("'tool_call.started'") && text.includes("status = 'approved'");

/** A new org's run with a refund waiting for its expert: the org, the expert's key, the call and its approval. */
export async function waitingRefund(h: Harness, amount: string, tools: string[] = ['shopify_refund.create']) {
  const org = await setupOrg(h.t, { tools });
  const expert = await createKey(h.t, org.orgId, 'expert');
  const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  const toolCallId = res.body.toolCallId as string;
  const approval = await approvalFor(h, expert.key, toolCallId);
  return { org, expert, toolCallId, approval };
}
