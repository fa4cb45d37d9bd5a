import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call } from './support.js';

/**
 * A token endpoint that answered 429 with Retry-After (VENDORS.md §5: retry token requests after the wait) is not
 * asked again for that credential before the wait is over, whether or not a live token is cached: the calls meanwhile
 * are answered VENDOR_RATE_LIMITED with the wait left, and send nothing. Before, only a refresh ahead of expiry waited;
 * with no token every new call sent its own token request to an endpoint that had asked for quiet (Jumio's allows 10
 * requests/s per tenant, shared by every client of the tenant). Every test org uses the emulator's one credential, so
 * the tests run in this order: the 30 s waits come last.
 */
describe('a token endpoint that asked for a wait', () => {
  let h: Harness;
  let org: OrgSetup;
  const LWA = /^\/auth\/o2\/token$/;
  beforeAll(async () => {
    // A call retries a 429's 1 s wait only while the wait, its jitter and a retry's room (a quarter of the budget)
    // still fit its VENDOR_TIMEOUT_MS; else it rightly hands the wait back (VENDOR_RATE_LIMITED, 1 s). The harness's
    // 2 s left 20 concurrent calls on a loaded CI machine ~0.4 s to reach their 429 (they took up to 1.7 s in all):
    // twice in CI one did not, and the spec failed on the budget, which is not what it is about.
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '50', VENDOR_TIMEOUT_MS: '8000' });
    org = await setupOrg(h.t, { tools: ['amazon_query.get_order', 'kyc.get_status'], vendors: ['amazon', 'jumio'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  const lwa = () => h.emu.count({ vendor: 'amazon', path: LWA });
  const getOrder = () => call(h, org, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped });

  it('20 concurrent calls, the shared LWA request answered 429 Retry-After: 1: their retries buy one token, all succeed', async () => {
    h.emu.fault({ vendor: 'amazon', path: LWA, kind: 'status', status: 429, headers: { 'retry-after': '1' }, times: 1 });
    const before = lwa();
    const results = await Promise.all(Array.from({ length: 20 }, getOrder));
    h.emu.clearFaults();
    const notOk = results.filter((r) => r.body.status !== 'succeeded').map((r) => ({ errorCode: r.body.errorCode, retryAfterSeconds: r.body.retryAfterSeconds }));
    expect(results.map((r) => r.body.status), JSON.stringify(notOk)).toEqual(Array(20).fill('succeeded'));
    expect(lwa() - before).toBeLessThanOrEqual(2);
  });

  it('LWA 429 Retry-After: 30 with no live token: the next calls within the wait do not ask LWA again, and say how long to wait', async () => {
    // The token the last test bought is no longer usable: its next call needs a new one.
    const { VendorRegistry } = await import('../../src/vendors/vendor-registry.js');
    const reg = h.t.app.get(VendorRegistry) as unknown as { handlers: Map<string, { tokens: { clear(): void } }> };
    reg.handlers.get('amazon')!.tokens.clear();
    h.emu.fault({ vendor: 'amazon', path: LWA, kind: 'status', status: 429, headers: { 'retry-after': '30' }, times: Infinity });
    const before = lwa();
    const answers: unknown[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await getOrder();
      answers.push({ status: res.body.status, errorCode: res.body.errorCode });
      // The wait left, as the vendor named it (a few ms under 30 s by the time later calls come).
      expect(res.body.retryAfterSeconds, JSON.stringify(res.body)).toBeGreaterThanOrEqual(25);
      expect(res.body.retryAfterSeconds).toBeLessThanOrEqual(30);
    }
    h.emu.clearFaults();
    expect(answers).toEqual(Array(8).fill({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' }));
    // One request learned the wait; the other seven came within it.
    expect(lwa() - before).toBe(1);
  });

  it('Jumio token endpoint 429 Retry-After: 30, 10 calls in a row: one token request, not ten', async () => {
    h.emu.fault({ vendor: 'jumio', path: /^\/oauth2\/token$/, kind: 'status', status: 429, headers: { 'retry-after': '30' }, times: Infinity });
    const tokenCalls = () => h.emu.count({ vendor: 'jumio', path: /^\/oauth2\/token$/ });
    const before = tokenCalls();
    for (let i = 0; i < 10; i++) {
      const res = await call(h, org, 'kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.initiated });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    }
    h.emu.clearFaults();
    expect(tokenCalls() - before).toBe(1);
  });
});
