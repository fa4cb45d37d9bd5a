import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { vendorRequest, type VendorHttpRequest } from '../vendors/http/vendor-http.js';
import type { EmulatedVendor, EmuRequest, EmuResponse } from './emulator.types.js';
import { ShopifyEmulator } from './shopify.emulator.js';
import { IN_PROGRESS_MESSAGE } from './shopify.refund-desk.js';
import { VendorEmulator } from './vendor-emulator.js';

/** A provider that stores POSTs and answers 201, as the Nango upstream does. */
class StoreVendor implements EmulatedVendor {
  readonly vendor = 'nango' as const;
  applied = 0;
  handles(req: EmuRequest): boolean {
    return req.path.startsWith('/proxy/');
  }
  handle(): EmuResponse {
    this.applied++;
    return { status: 201, headers: { 'x-store': '1' }, body: { id: `note-${this.applied}`, received: true } };
  }
  reset(): void {
    this.applied = 0;
  }
}

const store = new StoreVendor();
const shop = new ShopifyEmulator();
const emu = new VendorEmulator([store, shop]);

async function call(path: string, extra: Partial<VendorHttpRequest> = {}): Promise<{ status: number; headers: Record<string, string>; text: string }> {
  const r = await vendorRequest({ method: 'POST', url: `${emu.url}${path}`, timeoutMs: 2_000, connectTimeoutMs: 500, maxResponseBytes: 10 * 1024 * 1024, ...extra });
  return { status: r.status, headers: r.headers, text: r.text() };
}

const REFUND = (key: string): string =>
  `mutation($input: RefundInput!) { refundCreate(input: $input) @idempotent(key: "${key}") { refund { id } userErrors { field message } } }`;
const INPUT = {
  input: {
    orderId: 'gid://shopify/Order/12345',
    transactions: [{ orderId: 'gid://shopify/Order/12345', parentId: 'gid://shopify/OrderTransaction/71001', amount: '4.00', gateway: 'shopify_payments', kind: 'REFUND' }],
  },
};

async function refund(key: string): Promise<{ status: number; body: { data?: { refundCreate?: { refund: unknown; userErrors: { message: string }[] } } } }> {
  const r = await call('/admin/api/2026-07/graphql.json', {
    headers: { 'content-type': 'application/json', 'x-shopify-access-token': shop.accessToken },
    body: JSON.stringify({ query: REFUND(key), variables: INPUT }),
  });
  // Edge 5xx answers are HTML: only a 200 carries the GraphQL body.
  return { status: r.status, body: r.status === 200 ? (JSON.parse(r.text) as never) : {} };
}

async function until(check: () => boolean): Promise<void> {
  const end = Date.now() + 2_000;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

beforeAll(async () => {
  await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('faults that apply the request and then spoil the answer', () => {
  it('malformed_after applies, then answers the vendor’s own status with its JSON cut off', async () => {
    emu.fault({ kind: 'malformed_after' });
    const res = await call('/proxy/notes', { body: '{}' });
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toMatch(/json/);
    expect(res.headers['x-store']).toBe('1');
    expect(() => JSON.parse(res.text) as unknown).toThrow();
    expect(store.applied).toBe(1);
    expect(emu.requests[0].applied).toBe(true);
  });

  it('huge_after applies, then answers the vendor’s own status with a body of sizeBytes', async () => {
    emu.fault({ kind: 'huge_after', sizeBytes: 100_000 });
    const res = await call('/proxy/notes', { body: '{}' });
    expect(res.status).toBe(201);
    expect(res.text.length).toBe(100_000);
    expect(store.applied).toBe(1);
  });

  it('status_then_apply answers 504 at once and applies the request after delayMs', async () => {
    emu.fault({ kind: 'status_then_apply', delayMs: 150 });
    const res = await call('/proxy/notes', { body: '{}' });
    expect(res.status).toBe(504);
    expect(store.applied).toBe(0);
    await until(() => store.applied === 1);
    expect(emu.requests[0].applied).toBe(true);
  });

  it('Shopify: a refundCreate resent while its first request is still processing is "in progress"; later it replays the one refund', async () => {
    emu.fault({ vendor: 'shopify', kind: 'status_then_apply', status: 503, delayMs: 200 });
    expect((await refund('k-slow')).status).toBe(503);
    const during = await refund('k-slow');
    expect(during.body.data?.refundCreate).toEqual({ refund: null, order: null, userErrors: [{ field: null, message: IN_PROGRESS_MESSAGE }] });
    expect(shop.refundCount(12345)).toBe(0);
    // Another key is not held up.
    expect((await refund('k-other')).body.data?.refundCreate?.userErrors).toEqual([]);
    await until(() => shop.refundCount(12345) === 2);
    const after = await refund('k-slow');
    expect(after.body.data?.refundCreate).toMatchObject({ refund: { id: expect.any(String) }, userErrors: [] });
    expect(shop.refundCount(12345)).toBe(2);
  });
});
