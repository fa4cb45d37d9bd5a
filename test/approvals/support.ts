import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
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

/**
 * Puts `around` between the app's statements (Sql.query and Sql.prepared) and the database — to fail one
 * the way a database blip or a lost answer does, or act at a chosen moment. The database itself is real.
 * Returns the undo.
 */
export function aroundStatements(sql: Sql, around: (text: string, params: unknown[], send: () => Promise<unknown[]>) => Promise<unknown[]>): () => void {
  const target = sql as unknown as { query: Statement; prepared: Statement };
  const query = target.query;
  const prepared = target.prepared;
  target.query = (text, params = []) => around(text, params, () => query.call(sql, text, params));
  target.prepared = (text, params = []) => around(text, params, () => prepared.call(sql, text, params));
  return () => {
    target.query = query;
    target.prepared = prepared;
  };
}

/** An error as pg reports a connection the server dropped (isDatabaseUnavailable). */
export const connectionLost = (): Error => Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' });

/** The statement that claims an approved call (approved → running, tool_call.started). */
export const isClaim = (text: string): boolean => text.includes("'tool_call.started'") && text.includes("status = 'approved'");
