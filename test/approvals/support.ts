import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import type { PoolClient } from 'pg';
import type { Sql } from '../../src/db/sql.js';
import type { Harness } from '../support/scenario.js';
import { toolUse } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

export const refundUse = (amount = '1.00', orderId = '12345') => toolUse('shopify_refund', { action: 'create', orderId, amount });

export const refunds = (h: Harness, orderId = '12345'): number => h.emu.vendor<ShopifyEmulator>('shopify').refundCount(orderId);

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
