import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { ShopifyEmulator } from '../../emulator/shopify.emulator.js';
import { SHOPIFY_EMULATOR_TOKEN } from '../../emulator/shopify.fixtures.js';
import { VendorEmulator } from '../../emulator/vendor-emulator.js';
import { TokenCache } from '../auth/token-cache.js';
import { callContext, emulatorEndpoints } from '../handler.spec-support.js';
import { ShopifyHandler } from './shopify.handler.js';
import type { RefundLeaseKey, RefundLeases } from './shopify.refund-lease.js';

/**
 * In memory, with SqlRefundLeases' semantics (one holder per order; acquire waits until it is free), and a hook
 * telling when a holder starts waiting.
 */
class WaitingLeases implements RefundLeases {
  private readonly held = new Map<string, { holder: string; freed: Promise<void>; free: () => void }>();
  onWait?: () => void;
  /** Every acquire, as shop/order. */
  readonly taken: string[] = [];
  async acquire(key: RefundLeaseKey, holder: string): Promise<null> {
    const k = `${key.shopDomain}/${key.orderId}`;
    this.taken.push(k);
    for (;;) {
      const cur = this.held.get(k);
      if (!cur || cur.holder === holder) break;
      this.onWait?.();
      await cur.freed;
    }
    let free!: () => void;
    const freed = new Promise<void>((r) => (free = r));
    this.held.set(k, { holder, freed, free });
    return null;
  }
  async release(key: RefundLeaseKey, holder: string): Promise<void> {
    const k = `${key.shopDomain}/${key.orderId}`;
    const cur = this.held.get(k);
    if (cur?.holder === holder) {
      this.held.delete(k);
      cur.free();
    }
  }
}

const emu = new VendorEmulator([new ShopifyEmulator()]);
const shop = (): ShopifyEmulator => emu.vendor<ShopifyEmulator>('shopify');
/** The refunds the emulated shop recorded on an order, as [gateway, cents], oldest first. */
const refundsOf = (orderId: number): [string, number][] =>
  shop()
    .order(orderId)!
    .transactions.filter((t) => t.kind === 'REFUND')
    .map((t) => [t.gateway, t.amountCents]);
const leases = new WaitingLeases();
let handler: ShopifyHandler;
let unleased: ShopifyHandler;

const refund = (params: Record<string, unknown>) =>
  callContext({
    toolCallId: randomUUID(),
    idempotencyKey: `run-1:${randomUUID()}`,
    toolName: 'shopify_refund',
    action: 'create',
    params,
    credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: SHOPIFY_EMULATOR_TOKEN },
  });

beforeAll(async () => {
  await emu.start();
  const endpoints = emulatorEndpoints(emu.url, { timeoutMs: 5_000, connectTimeoutMs: 1_000 });
  handler = new ShopifyHandler(endpoints, new TokenCache(), undefined, leases);
  unleased = new ShopifyHandler(endpoints, new TokenCache());
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

it('a refund that waited for the order\'s lease picks its payment from what is refundable after the refund it waited for', async () => {
  // Order 1005: gift card 10.00, card 35.00. Another refund holds the order's lease while it takes 30.00 from the card.
  const lease: RefundLeaseKey = { orgId: 'org', shopDomain: 'demo-shop.myshopify.com', orderId: '1005' };
  await leases.acquire(lease, 'the other refund');
  const waiting = new Promise<void>((r) => (leases.onWait = r));
  const second = handler.execute(refund({ orderId: '1005', amount: '10.00' }));
  await waiting;
  expect(await unleased.execute(refund({ orderId: '1005', amount: '30.00' }))).toMatchObject({ ok: true });
  await leases.release(lease, 'the other refund');
  // Read before the wait, the card showed 35.00 refundable: the 10.00 went to it and Shopify refused it (5.00 left).
  expect(await second).toMatchObject({ ok: true, data: { amount: '10.00' } });
  expect(refundsOf(1005)).toEqual([
    ['shopify_payments', 3_000],
    ['gift_card', 1_000],
  ]);
});

it('a refund whose mutation was throttled (never applied, lease given back) picks its payment again on the retry', async () => {
  // Order 1005: gift card 10.00, card 35.00. A's 10.00 would go to the card; its mutation is throttled.
  const a = refund({ orderId: '1005', amount: '10.00' });
  emu.fault({ vendor: 'shopify', kind: 'throttled', bodyMatch: /refundCreate/ });
  expect(await handler.execute(a)).toMatchObject({ ok: false, kind: 'rate_limited' });
  expect(refundsOf(1005)).toEqual([]);
  // Nothing of A at Shopify, the lease given back: another refund takes 30.00 from the card (5.00 left).
  expect(await handler.execute(refund({ orderId: '1005', amount: '30.00' }))).toMatchObject({ ok: true });
  // A's retry (the executor's next attempt, same call context) goes to the gift card, not the card it picked first.
  expect(await handler.execute({ ...a, attempt: 1 })).toMatchObject({ ok: true, data: { amount: '10.00' } });
  expect(refundsOf(1005)).toEqual([
    ['shopify_payments', 3_000],
    ['gift_card', 1_000],
  ]);
});

it('a refund whose credentials the shop refuses (401 on the order read) takes no lease: the order is never held on a shop domain alone', async () => {
  const before = leases.taken.length;
  const refused = { ...refund({ orderId: '1005', amount: '10.00' }), credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: 'shpat_not_a_token_of_this_shop_000000' } };
  expect(await handler.execute(refused)).toMatchObject({ ok: false, kind: 'auth', requestSent: false });
  expect(leases.taken.length).toBe(before);
  expect(emu.requests.filter((r) => r.body.includes('refundCreate'))).toEqual([]);
  // With credentials that reach the shop: read, lease, read again under it, refund.
  expect(await handler.execute(refund({ orderId: '1005', amount: '10.00' }))).toMatchObject({ ok: true });
  expect(leases.taken.slice(before)).toEqual(['demo-shop.myshopify.com/1005']);
  expect(emu.requests.filter((r) => r.body.includes('RefundContext') && r.headers['x-shopify-access-token'] === SHOPIFY_EMULATOR_TOKEN)).toHaveLength(2);
});
