import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
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
