import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { VendorRegistry } from '../../src/vendors/vendor-registry.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth } from '../support/test-app.js';
import { call, eventsOf, rowOf, waitFor } from './support.js';

const THRESHOLD = 3;
const COOLDOWN_MS = 30_000;
const GRAPHQL = /graphql\.json$/;

/** The circuit breaker per org × vendor, driven by the app's injected clock (no sleeps). */
describe('circuit breaker through the pipeline', () => {
  let h: Harness;
  let clock: Clock;
  beforeAll(async () => {
    h = await startHarness({ CIRCUIT_BREAKER_THRESHOLD: String(THRESHOLD), CIRCUIT_BREAKER_COOLDOWN_MS: String(COOLDOWN_MS), VENDOR_MAX_RETRIES: '0' });
    clock = h.t.app.get(Clock);
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const fresh = () =>
    setupOrg(h.t, {
      tools: ['order_lookup.lookup', 'shopify_query.get_product', 'amazon_query.get_order'],
      vendors: ['shopify', 'amazon'],
      rules: [{ id: 'no-products', match: { toolName: 'shopify_query.get_product' }, decision: 'block' }],
    });
  const lookup = (org: OrgSetup, orderId = '12345') => call(h, org, 'order_lookup', { action: 'lookup', orderId });
  const state = (org: OrgSetup) => h.t.app.get(RuntimeToolExecutor).breakerFor(org.orgId, 'shopify').current;
  const shopifyCalls = () => h.emu.count({ path: GRAPHQL });

  async function openBreaker(org: OrgSetup): Promise<void> {
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, times: Infinity });
    for (let i = 0; i < THRESHOLD; i++) expect((await lookup(org)).body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(state(org)).toBe('open');
  }

  it('opens after the threshold and then fails fast with CIRCUIT_OPEN, without calling the vendor', async () => {
    const org = await fresh();
    const before = shopifyCalls();
    await openBreaker(org);
    expect(shopifyCalls() - before).toBe(THRESHOLD);

    const fast = await lookup(org);
    expect(fast.status).toBe(200);
    expect(fast.body).toMatchObject({ status: 'failed', errorCode: 'CIRCUIT_OPEN', toolResult: { is_error: true } });
    expect(fast.body.toolResult.content).toMatch(/temporarily unavailable/);
    expect(shopifyCalls() - before).toBe(THRESHOLD);
    expect(await rowOf(h, fast.body.toolCallId)).toMatchObject({ status: 'failed', error_code: 'CIRCUIT_OPEN', cost_cents: 0 });
    expect((await eventsOf(h, fast.body.toolCallId)).at(-1)).toMatchObject({ type: 'tool_call.failed', metadata: { errorCode: 'CIRCUIT_OPEN' } });

    // Per org × vendor: another vendor of this org and the same vendor of another org are unaffected.
    h.emu.clearFaults();
    expect((await call(h, org, 'amazon_query', { action: 'get_order', orderId: '112-0000001-1234567' })).body.status).toBe('succeeded');
    expect((await lookup(await fresh())).body.status).toBe('succeeded');
    // Still open just before the cooldown ends.
    clock.advance(COOLDOWN_MS - 1_000);
    expect((await lookup(org)).body.errorCode).toBe('CIRCUIT_OPEN');
  });

  it('the cooldown is a duration: the host clock stepped back 10 minutes (NTP, a resumed VM) does not keep the breaker open', async () => {
    const org = await fresh();
    await openBreaker(org);
    h.emu.clearFaults();
    const wall = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() - 600_000);
    try {
      clock.advance(COOLDOWN_MS);
      expect(state(org)).toBe('half_open');
      expect((await lookup(org)).body.status).toBe('succeeded');
      expect(state(org)).toBe('closed');
    } finally {
      wall.mockRestore();
    }
  });

  it('after the cooldown exactly one probe goes through; it succeeds and the breaker closes', async () => {
    const org = await fresh();
    await openBreaker(org);
    h.emu.clearFaults();
    clock.advance(COOLDOWN_MS);
    expect(state(org)).toBe('half_open');

    // Hold the probe at the vendor while others arrive: they must not go through.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 600 });
    const before = shopifyCalls();
    const probe = lookup(org).then((r) => r); // supertest starts a request only when it is awaited
    await waitFor(() => shopifyCalls() - before === 1);
    const others = await Promise.all([lookup(org), lookup(org), lookup(org)]);
    expect(others.map((r) => r.body.errorCode)).toEqual(['CIRCUIT_OPEN', 'CIRCUIT_OPEN', 'CIRCUIT_OPEN']);
    expect((await probe).body).toMatchObject({ status: 'succeeded', errorCode: null });
    expect(shopifyCalls() - before).toBe(1);

    expect(state(org)).toBe('closed');
    const after = await Promise.all([lookup(org), lookup(org)]);
    expect(after.map((r) => r.body.status)).toEqual(['succeeded', 'succeeded']);
    expect(shopifyCalls() - before).toBe(3);
  });

  it('a failed probe opens it again for a whole new cooldown', async () => {
    const org = await fresh();
    await openBreaker(org);
    clock.advance(COOLDOWN_MS);
    const before = shopifyCalls();
    const probe = await lookup(org);
    expect(probe.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(shopifyCalls() - before).toBe(1);
    expect(state(org)).toBe('open');
    expect((await lookup(org)).body.errorCode).toBe('CIRCUIT_OPEN');
    expect(shopifyCalls() - before).toBe(1);

    h.emu.clearFaults();
    clock.advance(COOLDOWN_MS);
    expect((await lookup(org)).body.status).toBe('succeeded');
    expect(state(org)).toBe('closed');
  });

  it('a probe that ends in an exception of our own (EXECUTION_ERROR) does not wedge the breaker half-open', async () => {
    const org = await fresh();
    await openBreaker(org);
    h.emu.clearFaults();
    clock.advance(COOLDOWN_MS);
    const handler = h.t.app.get(VendorRegistry).get('shopify');
    const execute = handler.execute.bind(handler);
    handler.execute = () => Promise.reject(new Error('handler bug'));
    try {
      expect((await lookup(org)).body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
    } finally {
      handler.execute = execute;
    }
    // The probe slot is free again: the next call probes the vendor and closes the breaker.
    expect((await lookup(org)).body.status).toBe('succeeded');
    expect(state(org)).toBe('closed');
  });

  it('never opens on failures caused by the params or by policy: VENDOR_NOT_FOUND, INVALID_INPUT, POLICY_BLOCKED', async () => {
    const org = await fresh();
    for (let i = 0; i < THRESHOLD * 2; i++) {
      expect((await lookup(org, '999999')).body.errorCode).toBe('VENDOR_NOT_FOUND');
      expect((await lookup(org, 'not-a-number')).body.errorCode).toBe('INVALID_INPUT');
      expect((await call(h, org, 'shopify_query', { action: 'get_product', productId: '632910392' })).body.errorCode).toBe('POLICY_BLOCKED');
    }
    expect(state(org)).toBe('closed');
    const before = shopifyCalls();
    expect((await lookup(org)).body.status).toBe('succeeded');
    expect(shopifyCalls() - before).toBe(1);
  });

  it('counts consecutive vendor failures only: a not-found answer in between proves the vendor is up', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, times: THRESHOLD - 1 });
    for (let i = 0; i < THRESHOLD - 1; i++) expect((await lookup(org)).body.errorCode).toBe('VENDOR_ERROR');
    expect((await lookup(org, '999999')).body.errorCode).toBe('VENDOR_NOT_FOUND');
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, times: THRESHOLD - 1 });
    for (let i = 0; i < THRESHOLD - 1; i++) expect((await lookup(org)).body.errorCode).toBe('VENDOR_ERROR');
    expect(state(org)).toBe('closed');
    expect((await lookup(org)).body.status).toBe('succeeded');
  });
  it('credentials replaced after it opened start it again closed; the same credentials saved again do not', async () => {
    const org = await fresh();
    await openBreaker(org);
    h.emu.clearFaults();
    const put = (shopDomain: string) =>
      h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: { ...CREDENTIALS.shopify, shopDomain } });
    // Saved again as they were: the same stored config (the same stamp), so the breaker those calls opened stays open.
    expect((await put(shopDomainOf(org.orgId))).status).toBe(200);
    expect((await lookup(org)).body.errorCode).toBe('CIRCUIT_OPEN');
    // An admin fixes them (another shop domain): the next call reaches the vendor instead of waiting out the cooldown.
    const before = shopifyCalls();
    expect((await put(`fixed-${shopDomainOf(org.orgId)}`)).status).toBe(200);
    expect((await lookup(org)).body).toMatchObject({ status: 'succeeded' });
    expect(shopifyCalls() - before).toBe(1);
    expect(state(org)).toBe('closed');
  });
});
