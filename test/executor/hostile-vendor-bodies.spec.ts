/**
 * A vendor is an untrusted party too (a reviewer's pass over hostile answers under VENDOR_MAX_RESPONSE_BYTES):
 * - 2xx JSON nested 100,000 deep (200 KB): JSON.parse took it, and serializing it for the ledger overflowed the stack
 *   after the vendor had answered — a 500 to the agent, the call (a write included) left `running`, a resend 409
 *   until the orphan sweep. The vendor layer now refuses JSON nested past 64 levels as an unreadable answer: a read
 *   fails VENDOR_ERROR, a write is indeterminate (OUTCOME_UNKNOWN), like any answer it cannot read.
 * - Shopify lists deduplicated with Array.includes in a loop (tracking numbers, ACCESS_DENIED paths): 100,000 of them
 *   froze the event loop — every org's requests — for 7 s. Sets now.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, rowOf, send, setupNangoOrg } from './support.js';

/** The longest gap between 10 ms ticks while `work` runs: the gateway runs in this process, so its event-loop stall. */
async function longestStall<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number }> {
  let last = performance.now();
  let worst = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 10);
  try {
    const result = await work();
    return { result, stallMs: worst };
  } finally {
    clearInterval(tick);
  }
}

describe('hostile vendor answers', () => {
  let h: Harness;
  let org: OrgSetup;
  let shop: OrgSetup;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '15000' });
    org = await setupNangoOrg(h.t);
    shop = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const nested = (depth: number): string => '{"a":' + '['.repeat(depth) + ']'.repeat(depth) + '}';
  const deep = nested(100_000);

  it('a read answered 200 with 100k-deep JSON fails VENDOR_ERROR (not a 500), its row settled', async () => {
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, headers: { 'content-type': 'application/json' }, body: deep });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'failed' });
  });

  it('a write answered 201 with 100k-deep JSON is indeterminate (the provider applied it), never a 500 with the row left running; a resend answers it', async () => {
    const before = h.emu.count({ vendor: 'nango', method: 'POST' });
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 201, headers: { 'content-type': 'application/json' }, body: deep });
    const use = toolUse('nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 1 } });
    const res = await send(h, org, use);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'indeterminate' });
    const again = await send(h, org, use);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'indeterminate', replayed: true });
    expect(h.emu.count({ vendor: 'nango', method: 'POST' }) - before).toBe(1); // the resend sent nothing
  });

  it('JSON nested as deep as a real answer could be (60 levels) is read as ever', async () => {
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, headers: { 'content-type': 'application/json' }, body: nested(60) });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body.status).toBe('succeeded');
  });

  it('100,000 tracking numbers in an order do not freeze the gateway (before: 7 s)', async () => {
    const n = 100_000;
    const trackingInfo = Array.from({ length: n }, (_, i) => ({ number: `1Z${String(i).padStart(8, '0')}` }));
    trackingInfo.push({ number: '1Z00000007' }); // a repeat
    const body = JSON.stringify({ data: { order: { name: '#1001', fulfillments: [{ status: 'SUCCESS', trackingInfo }] } } });
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 200, headers: { 'content-type': 'application/json' }, body });
    const { result: res, stallMs } = await longestStall(() => call(h, shop, 'order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(200);
    expect(stallMs).toBeLessThan(stallBound(body));
  }, 60_000);

  it('60,000 ACCESS_DENIED errors do not freeze the gateway (before: 7 s)', async () => {
    const errors = Array.from({ length: 60_000 }, (_, i) => ({ message: 'x', extensions: { code: 'ACCESS_DENIED' }, path: ['order', `f${i}`] }));
    const body = JSON.stringify({ data: { order: { name: '#1001' } }, errors });
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 200, headers: { 'content-type': 'application/json' }, body });
    const { result: res, stallMs } = await longestStall(() => call(h, shop, 'order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(200);
    expect(stallMs).toBeLessThan(stallBound(body));
  }, 60_000);
});

/**
 * The longest stall allowed for reading `body`: 3 s, plus 20 times what parsing it takes this process now. The stall is
 * CPU on the event loop and grows with the share of the 2 cores the other test worker leaves (160 ms quiet, 900 ms
 * beside CPU burners), while the quadratic reading these guard against took 7 s quiet and grows the same way.
 */
function stallBound(body: string): number {
  let parseMs = 0;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    JSON.parse(body);
    parseMs = Math.max(parseMs, performance.now() - t0);
  }
  return 3_000 + 20 * parseMs;
}
