import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { CircuitBreaker } from '../../src/executor/circuit-breaker.js';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { VendorRegistry } from '../../src/vendors/vendor-registry.js';
import { failedOutcome, type VendorHandler } from '../../src/vendors/vendor-handler.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call, rowOf, send } from './support.js';

/** Catalog costCents (src/vendors/<vendor>/<vendor>.tools.ts). */
const COST = { lookup: 1, getProduct: 1, addNote: 2, refund: 5, amazon: 0 };

describe('cost of tool calls', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_MAX_RETRIES: '0' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('each executed call records its catalog cost; the run total is the sum; calls that never reached the vendor cost 0', async () => {
    const org = await setupOrg(h.t, {
      tools: ['order_lookup.lookup', 'shopify_query.get_product', 'shopify_order.add_note', 'shopify_refund.create', 'amazon_query.get_order'],
      vendors: ['shopify', 'amazon'],
      rules: [
        { id: 'allow-small-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'lte', value: 10 }] }, decision: 'allow' },
        { id: 'no-products', match: { toolName: 'shopify_query.get_product' }, decision: 'block' },
      ],
    });
    const costs: [string, number, number][] = [];
    const record = async (label: string, res: { body: { toolCallId: string } }, expected: number) => {
      const row = await rowOf(h, res.body.toolCallId);
      costs.push([label, row.cost_cents as number, expected]);
    };

    await record('lookup', await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' }), COST.lookup);
    await record('add_note', await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'cost test' }), COST.addNote);
    await record('refund', await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '2.00' }), COST.refund);
    await record('amazon', await call(h, org, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }), COST.amazon);
    // Reached the vendor and failed there: the vendor call still happened.
    const notFound = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '999999' });
    expect(notFound.body.errorCode).toBe('VENDOR_NOT_FOUND');
    await record('not found at vendor', notFound, COST.lookup);
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500 });
    const vendorError = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(vendorError.body.errorCode).toBe('VENDOR_ERROR');
    await record('vendor error', vendorError, COST.lookup);

    // Never executed: blocked, invalid, waiting for approval.
    const blocked = await call(h, org, 'shopify_query', { action: 'get_product', productId: '632910392' });
    expect(blocked.body.errorCode).toBe('POLICY_BLOCKED');
    await record('policy blocked', blocked, 0);
    const invalid = await call(h, org, 'order_lookup', { action: 'lookup', orderId: 'x' });
    expect(invalid.body.errorCode).toBe('INVALID_INPUT');
    await record('invalid input', invalid, 0);
    const waiting = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '50.00' });
    expect(waiting.status).toBe(202);
    await record('waiting approval', waiting, 0);

    // A replay is the same call, not a new cost.
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '450789469' });
    await record('replayed lookup', await send(h, org, use), COST.lookup);
    expect((await send(h, org, use)).body.replayed).toBe(true);

    expect(costs.map(([label, actual]) => [label, actual])).toEqual(costs.map(([label, , expected]) => [label, expected]));
    const run = await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey));
    expect(run.status).toBe(200);
    const total = costs.reduce((sum, [, actual]) => sum + actual, 0);
    expect(total).toBe(1 + 2 + 5 + 0 + 1 + 1 + 1);
    expect(run.body.totalCostCents).toBe(total);
    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: number }];
    expect(n).toBe(costs.length);
  });

  it('a call without credentials never reached the vendor and costs nothing (CIRCUIT_OPEN: breaker.spec.ts)', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(res.body.errorCode).toBe('CREDENTIALS_NOT_FOUND');
    expect((await rowOf(h, res.body.toolCallId)).cost_cents).toBe(0);
    const run = await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey));
    expect(run.body.totalCostCents).toBe(0);
  });

  /** An org whose policy lets every refund through (no approval): the refund runs at once. */
  const refundOrg = () =>
    setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });

  /** The run's total and the row's cost after `res`. */
  async function costs(org: OrgSetup, res: { body: { toolCallId: string } }): Promise<{ row: number; total: number }> {
    const run = await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey));
    return { row: (await rowOf(h, res.body.toolCallId)).cost_cents as number, total: run.body.totalCostCents as number };
  }

  /** Runs `fn` with the Shopify handler's execute replaced by `stub`. */
  async function withShopify(stub: VendorHandler['execute'], fn: () => Promise<void>): Promise<void> {
    const handler = h.t.app.get(VendorRegistry).get('shopify');
    const execute = handler.execute.bind(handler);
    handler.execute = stub;
    try {
      await fn();
    } finally {
      handler.execute = execute;
    }
  }

  it('stored credentials that cannot be decrypted: CREDENTIALS_INVALID, nothing sent, nothing charged; a vendor 404 still costs', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const notFound = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '999999' });
    expect(notFound.body.errorCode).toBe('VENDOR_NOT_FOUND');
    expect(await costs(org, notFound)).toEqual({ row: COST.lookup, total: COST.lookup });

    await h.t.ds.query(`UPDATE integration_credentials SET auth_tag = decode(repeat('00', 16), 'hex') WHERE org_id = $1 AND integration_type = 'shopify'`, [org.orgId]);
    h.t.app.get(CredentialsService).clearCache();
    const sent = h.emu.requests.length;
    const invalid = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(invalid.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
    expect(h.emu.requests.length).toBe(sent);
    expect(await costs(org, invalid)).toEqual({ row: 0, total: COST.lookup });
  });

  it('a timeout before anything was sent costs nothing, read or write; one that may have been sent costs', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_order.add_note'] });
    let total = 0;
    // Connect timeouts: the request never left.
    await withShopify(
      () => Promise.resolve(failedOutcome('timeout', 'vendor connect timed out', undefined, undefined, false)),
      async () => {
        const read = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
        expect(read.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
        expect(await costs(org, read)).toEqual({ row: 0, total });
        const write = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'never sent' });
        expect(write.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
        expect(await costs(org, write)).toEqual({ row: 0, total });
      },
    );
    // Sent, no answer in time: a read failed at the vendor, a write may have taken effect.
    await withShopify(
      () => Promise.resolve(failedOutcome('timeout', 'vendor timed out', undefined, undefined, true)),
      async () => {
        const read = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
        expect(read.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
        total += COST.lookup;
        expect(await costs(org, read)).toEqual({ row: COST.lookup, total });
      },
    );
    h.emu.fault({ vendor: 'shopify', kind: 'reset_after' });
    const unknown = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'maybe sent' });
    expect(unknown.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    total += COST.addNote;
    expect(await costs(org, unknown)).toEqual({ row: COST.addNote, total });
  });

  it('a refund stopped at its order read is charged when the read reached Shopify, answered (503) or not (timed out); no refund is sent', async () => {
    const org = await refundOrg();
    const refundsSent = () => h.emu.requests.filter((r) => r.body.includes('refundCreate')).length;
    const refunds = refundsSent();
    let total = 0;
    try {
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, times: Infinity });
      const answered = await call(h, org, 'shopify_refund', { action: 'create', orderId: '1002', amount: '1.00' });
      expect(answered.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
      total += COST.refund;
      expect(await costs(org, answered)).toEqual({ row: COST.refund, total });
      h.emu.clearFaults();

      // Past VENDOR_TIMEOUT_MS: the read arrived at Shopify, its answer did not.
      const before = h.emu.count({ vendor: 'shopify' });
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: h.t.config.VENDOR_TIMEOUT_MS + 500, times: Infinity });
      const hung = await call(h, org, 'shopify_refund', { action: 'create', orderId: '1002', amount: '1.00' });
      expect(hung.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
      expect(h.emu.count({ vendor: 'shopify' })).toBeGreaterThan(before);
      total += COST.refund;
      expect(await costs(org, hung)).toEqual({ row: COST.refund, total });
    } finally {
      h.emu.clearFaults();
    }
    expect(refundsSent()).toBe(refunds);
  });

  it('a refund stopped after Shopify answered its order read (too little time left for the mutation) is charged; none sent', async () => {
    const org = await refundOrg();
    const from = h.emu.requests.length;
    // Answered 200 after more than half the budget: less than the half kept for the refund is left.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: h.t.config.VENDOR_TIMEOUT_MS * 0.55, bodyMatch: /RefundContext/, times: 1 });
    try {
      const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
      expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/too little of the call's time budget/);
      expect(await costs(org, res)).toEqual({ row: COST.refund, total: COST.refund });
    } finally {
      h.emu.clearFaults();
    }
    const sent = h.emu.requests.slice(from);
    expect(sent.filter((r) => r.body.includes('RefundContext'))).toHaveLength(1);
    expect(sent.filter((r) => r.body.includes('refundCreate'))).toHaveLength(0);
  });

  it('a refund whose order read may have reached Shopify, then an exception outside the handler: failed (nothing written), charged', async () => {
    const org = await refundOrg();
    h.emu.fault({ vendor: 'shopify', kind: 'reset_before', bodyMatch: /RefundContext/, times: 1 });
    // Thrown after the attempt was recorded (the breaker counting the reset): the executor's backstop answers.
    const spy = vi.spyOn(CircuitBreaker.prototype, 'onFailure').mockImplementationOnce(() => {
      throw new Error('injected: a failure outside the handler, after the attempt');
    });
    const from = h.emu.requests.length;
    try {
      const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
      expect((await rowOf(h, res.body.toolCallId)).error_text).toBe('the tool failed unexpectedly before its write was sent to the vendor');
      expect(await costs(org, res)).toEqual({ row: COST.refund, total: COST.refund });
    } finally {
      spy.mockRestore();
      h.emu.clearFaults();
    }
    expect(h.emu.requests.slice(from).filter((r) => r.body.includes('refundCreate'))).toHaveLength(0);
  });

  it('an exception before any request (EXECUTION_ERROR) costs nothing and leaves even a write failed; one thrown by the handler counts as sent', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_order.add_note'] });
    const credentials = h.t.app.get(CredentialsService);
    // The executor loads the config with its stamp (re-checked before a retry): the lookup it makes fails.
    const load = credentials.loadStamped.bind(credentials);
    credentials.loadStamped = () => Promise.reject(new Error('database hiccup'));
    const sent = h.emu.requests.length;
    try {
      const read = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
      expect(read.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
      expect(await costs(org, read)).toEqual({ row: 0, total: 0 });
      // Nothing was sent, so the outcome is known: failed, not indeterminate.
      const write = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'never sent' });
      expect(write.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
      expect(await costs(org, write)).toEqual({ row: 0, total: 0 });
    } finally {
      credentials.loadStamped = load;
    }
    expect(h.emu.requests.length).toBe(sent);

    await withShopify(
      () => Promise.reject(new Error('handler bug')),
      async () => {
        const read = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
        expect(read.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
        expect(await costs(org, read)).toEqual({ row: COST.lookup, total: COST.lookup });
        const write = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'maybe sent' });
        expect(write.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
        expect(await costs(org, write)).toEqual({ row: COST.addNote, total: COST.lookup + COST.addNote });
      },
    );
  });
});
