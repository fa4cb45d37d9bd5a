import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { CREDENTIALS, emulatorEnv, setupOrg, shopDomainOf, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, startTestApp } from '../support/test-app.js';
import { call, eventsOf, refundKeysSince, rowOf, send, waitFor } from './support.js';

const RULES = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }];
const REFUND = /refundCreate/;

/**
 * shopify_refund.create through the pipeline: GraphQL errors on the mutation
 * (VENDORS.md §1.4, §1.9), split-tender orders (§1.8), and one refund in
 * flight per order across replicas (§1.9 point 6).
 */
describe('shopify_refund.create, through the pipeline', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  beforeAll(async () => {
    h = await startHarness(); // VENDOR_TIMEOUT_MS 2000: a refund waits at most 1 s for the order's other one
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const fresh = () => setupOrg(h.t, { tools: ['shopify_refund.create'], rules: RULES });
  const refund = (org: OrgSetup, orderId: string, amount: string) => call(h, org, 'shopify_refund', { action: 'create', orderId, amount });
  const refundsSince = (from: number) => h.emu.requests.slice(from).filter((r) => REFUND.test(r.body));
  const leases = async (orgId: string) =>
    (await h.t.ds.query('SELECT order_id, lease_until > now() AS live FROM shopify_refund_leases WHERE org_id = $1', [orgId])) as { order_id: string; live: boolean }[];
  const graphqlAnswer = (body: object) => ({ vendor: 'shopify' as const, kind: 'status' as const, status: 200, bodyMatch: REFUND, body });

  it('a multi-currency order: order_lookup says the currency the customer paid in, and a refund naming it goes through', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create', 'order_lookup.lookup'], rules: RULES });
    const order = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '1004' });
    expect(order.body).toMatchObject({ status: 'succeeded', result: { orderId: '1004', currency: 'EUR' } });
    const unnamed = await refund(org, '1004', '2.00');
    expect(unnamed.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    // What the model reads points it at the currency, instead of "try again later".
    expect(unnamed.body.toolResult.content).toMatch(/same input again will fail the same way.*currency/);
    const named = await call(h, org, 'shopify_refund', { action: 'create', orderId: '1004', amount: '2.00', currency: order.body.result.currency });
    expect(named.body).toMatchObject({ status: 'succeeded' });
  });

  it('an order answer naming the customer\'s currency (KWD) but not the shop\'s: a refund leaving currency out is refused before it is sent (a rule written for the shop\'s money must not judge KWD); naming KWD goes through', async () => {
    const org = await fresh();
    const order = {
      id: 'gid://shopify/Order/1006',
      presentmentCurrencyCode: 'KWD',
      transactions: [
        {
          id: 'gid://shopify/OrderTransaction/71070', kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments',
          amountSet: { shopMoney: { amount: '147.06', currencyCode: 'USD' }, presentmentMoney: { amount: '45.25', currencyCode: 'KWD' } },
          maximumRefundableV2: { amount: '45.25', currencyCode: 'KWD' },
        },
      ],
    };
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 200, bodyMatch: /RefundContext/, body: { data: { order } }, times: Infinity });
    const before = shop.refundCount(1006);
    const unnamed = await call(h, org, 'shopify_refund', { action: 'create', orderId: '1006', amount: '45' });
    expect({ status: unnamed.body.status, refunds: shop.refundCount(1006) - before }).toEqual({ status: 'failed', refunds: 0 });
    expect((await rowOf(h, unnamed.body.toolCallId)).error_text).toMatch(/did not say the shop's currency: give currency "KWD"/);
    const named = await call(h, org, 'shopify_refund', { action: 'create', orderId: '1006', amount: '45', currency: 'KWD' });
    expect({ status: named.body.status, refunds: shop.refundCount(1006) - before }).toEqual({ status: 'succeeded', refunds: 1 });
  });

  describe('top-level GraphQL errors on refundCreate', () => {
    it('an error raised by refundCreate itself (path ["refundCreate"], data null): the resolver ran → indeterminate / OUTCOME_UNKNOWN, sent once, never resent', async () => {
      const org = await fresh();
      // A GraphQL field error (spec §7.1.2): the refund may or may not have been made.
      h.emu.fault(graphqlAnswer({ data: { refundCreate: null }, errors: [{ message: 'Timeout', locations: [{ line: 2, column: 3 }], path: ['refundCreate'] }] }));
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '2.00');
      expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolResult: { is_error: true } });
      expect(res.body.toolResult.content).toMatch(/Do not send it again/);
      expect(refundsSince(from)).toHaveLength(1);
      const row = await rowOf(h, res.body.toolCallId);
      expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0, vendor_status: 200 });
      expect(row.error_text).toMatch(/while running refundCreate/);
    });

    it('an error with no path and with `locations` (parse / validation: nothing ran) stays a refusal → failed / VENDOR_ERROR', async () => {
      const org = await fresh();
      h.emu.fault(graphqlAnswer({ errors: [{ message: "Argument 'input' has an invalid value", locations: [{ line: 2, column: 16 }], extensions: { code: 'argumentLiteralsIncompatible' } }] }));
      const res = await refund(org, '12345', '2.00');
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    });

    it('an org on an API version before @idempotent (2025-10): Shopify refuses the directive by validation (locations, a path from "mutation Refund") → failed / VENDOR_ERROR, not held against the breaker', async () => {
      const org = await fresh();
      const put = await h.t.http
        .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
        .set(adminAuth)
        .send({ config: { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId), apiVersion: '2025-10' } });
      expect(put.status).toBe(200);
      const breaker = h.t.app.get(RuntimeToolExecutor).breakerFor(org.orgId, 'shopify');
      const failures = vi.spyOn(breaker, 'onFailure');
      const refunds = shop.refundCount(12345);
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '2.00');
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', toolResult: { is_error: true } });
      expect(refundsSince(from)).toHaveLength(1);
      expect(shop.refundCount(12345)).toBe(refunds);
      expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/undefinedDirective/);
      expect(failures).not.toHaveBeenCalled();
      expect(await leases(org.orgId)).toEqual([]);
    });

    it('an error with no path and nothing placing it before execution (Shopify\'s execution "Timeout") → indeterminate / OUTCOME_UNKNOWN, sent once, the order kept leased', async () => {
      const org = await fresh();
      h.emu.fault(graphqlAnswer({ errors: [{ message: 'Timeout' }] }));
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '2.00');
      expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolResult: { is_error: true } });
      expect(refundsSince(from)).toHaveLength(1);
      const row = await rowOf(h, res.body.toolCallId);
      expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0, vendor_status: 200 });
      expect(row.error_text).toMatch(/does not say whether it ran/);
      // The run may still be going at Shopify: no other refund of the order may overlap it.
      expect(await leases(org.orgId)).toEqual([{ order_id: '12345', live: true }]);
    });

    it('IDEMPOTENCY_CONCURRENT_REQUEST as a top-level code is "in progress": polled with the same key → succeeded, one refund', async () => {
      const org = await fresh();
      const refunds = shop.refundCount(12345);
      h.emu.fault(
        graphqlAnswer({
          data: { refundCreate: null },
          errors: [{ message: 'This request is currently in progress, please try again.', path: ['refundCreate'], extensions: { code: 'IDEMPOTENCY_CONCURRENT_REQUEST' } }],
        }),
      );
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '2.50');
      expect(res.body).toMatchObject({ status: 'succeeded', result: { amount: '2.50' } });
      expect(shop.refundCount(12345) - refunds).toBe(1);
      const keys = refundKeysSince(h, from);
      expect(keys).toHaveLength(2);
      expect(new Set(keys).size).toBe(1);
      const retried = (await eventsOf(h, res.body.toolCallId)).filter((e) => e.type === 'tool_call.retried').map((e) => e.metadata.reason);
      expect(retried).toEqual(['in_progress']);
      // Shopify answered the key with its refund: nothing is still running, the order is free again.
      expect(await leases(org.orgId)).toEqual([]);
    });

    it('IDEMPOTENCY_KEY_PARAMETER_MISMATCH as a top-level code is a key conflict → indeterminate / OUTCOME_UNKNOWN, sent once, never re-keyed', async () => {
      const org = await fresh();
      h.emu.fault(
        graphqlAnswer({
          data: { refundCreate: null },
          errors: [{ message: 'The same idempotency key cannot be used with different operation parameters.', path: ['refundCreate'], extensions: { code: 'IDEMPOTENCY_KEY_PARAMETER_MISMATCH' } }],
        }),
      );
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '2.75');
      expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
      expect(refundsSince(from)).toHaveLength(1);
      expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/reconcile/);
    });
  });

  describe('the refund\'s payment transaction status (a Refund record is not proof money moved, VENDORS.md §1.8)', () => {
    const answeredWith = (status: string) =>
      graphqlAnswer({
        data: {
          refundCreate: {
            refund: { id: 'gid://shopify/Refund/9', transactions: { nodes: [{ id: 'gid://shopify/OrderTransaction/99', status, kind: 'REFUND' }] } },
            userErrors: [],
          },
        },
      });

    it('ERROR ("an error while processing the transaction": the money may have moved) → indeterminate / OUTCOME_UNKNOWN, sent once, never resent', async () => {
      const org = await fresh();
      h.emu.fault(answeredWith('ERROR'));
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '2.00');
      expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolResult: { is_error: true } });
      expect(res.body.toolResult.content).toMatch(/Do not send it again/);
      expect(refundsSince(from)).toHaveLength(1);
      const row = await rowOf(h, res.body.toolCallId);
      expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0, vendor_status: 200 });
      expect(row.error_text).toMatch(/ended in ERROR: whether the money moved is unknown/);
    });

    it.each(['UNKNOWN', 'SOME_STATUS_ADDED_LATER'])('%s (the refund is made, its transaction\'s status says nothing of the money) → indeterminate / OUTCOME_UNKNOWN, sent once, never resent', async (status) => {
      const org = await fresh();
      shop.setRefundTransactionStatus(status);
      try {
        const before = shop.refundCount(12345);
        const from = h.emu.requests.length;
        const res = await refund(org, '12345', '2.00');
        expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolResult: { is_error: true } });
        expect(res.body.toolResult.content).toMatch(/Do not send it again/);
        expect({ sent: refundsSince(from).length, made: shop.refundCount(12345) - before }).toEqual({ sent: 1, made: 1 });
        const row = await rowOf(h, res.body.toolCallId);
        expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0, vendor_status: 200 });
        expect(row.error_text).toMatch(/whether the money moved is unknown/);
      } finally {
        shop.setRefundTransactionStatus('SUCCESS');
      }
    });

    it('PENDING (accepted, not yet settled) stays a success with data.status "pending"', async () => {
      const org = await fresh();
      shop.setRefundTransactionStatus('PENDING');
      try {
        const res = await refund(org, '12345', '2.00');
        expect(res.body).toMatchObject({ status: 'succeeded', result: { orderId: '12345', status: 'pending' } });
      } finally {
        shop.setRefundTransactionStatus('SUCCESS');
      }
    });

    it('FAILURE (the money did not move) stays a definite failure → failed / VENDOR_ERROR', async () => {
      const org = await fresh();
      h.emu.fault(answeredWith('FAILURE'));
      const res = await refund(org, '12345', '2.00');
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
      expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/payment transaction failed/);
    });
  });

  it('an order id beyond Shopify\'s 64-bit ids is invalid input (422): nothing sent to Shopify, no lease taken', async () => {
    const org = await fresh();
    const from = h.emu.requests.length;
    for (const orderId of ['9223372036854775808', '99999999999999999999']) {
      const res = await refund(org, orderId, '1.00');
      expect([res.status, res.body.status, res.body.errorCode], orderId).toEqual([422, 'failed', 'INVALID_INPUT']);
    }
    expect(h.emu.requests.slice(from).filter((r) => r.vendor === 'shopify')).toHaveLength(0);
    expect(await leases(org.orgId)).toEqual([]);
  });

  describe('split tender (a gift card booked first, then a card)', () => {
    it('a refund the card covers goes to the card, not refused for exceeding the gift card; a small one goes to the card too', async () => {
      const org = await fresh();
      const order = shop.order(1005)!;
      const [giftCard, card] = order.transactions;
      expect(giftCard).toMatchObject({ gateway: 'gift_card', amountCents: 1_000 });
      expect(card).toMatchObject({ gateway: 'shopify_payments', amountCents: 3_500 });

      const big = await refund(org, '1005', '20.00');
      expect(big.body).toMatchObject({ status: 'succeeded', result: { orderId: '1005', amount: '20.00', status: 'success' } });
      const small = await refund(org, '1005', '5.00');
      expect(small.body).toMatchObject({ status: 'succeeded', result: { amount: '5.00' } });
      const refunded = order.transactions.filter((t) => t.kind === 'REFUND');
      expect(refunded.map((t) => [t.parentId, t.gateway, t.amountCents])).toEqual([
        [card.id, 'shopify_payments', 2_000],
        [card.id, 'shopify_payments', 500],
      ]);
    });

    it('a refund no single payment covers goes to the card and Shopify says it is more than refundable → failed, nothing refunded', async () => {
      const org = await fresh();
      const refunds = shop.refundCount(1005);
      const res = await refund(org, '1005', '40.00');
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
      expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/more than is still refundable/);
      expect(shop.refundCount(1005)).toBe(refunds);
      // Shopify answered (userErrors in a 200): a refusal, which the model reads as one, not "try later".
      expect(res.body.toolResult.content).toMatch(/^The vendor refused the request, and the action failed\. Sending the same input again will fail the same way/);
      expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ vendor_status: 200, vendor_refused: true });
    });
  });

  describe('one refund in flight per order (VENDORS.md §1.9 point 6)', () => {
    it('two refunds of one order posted at once never overlap at Shopify; both succeed and the lease is gone after', async () => {
      const org = await fresh();
      // The first refundCreate to arrive takes 250 ms (the other waits up to half its 2 s budget, 1 s, for the lease) at Shopify.
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 250, bodyMatch: REFUND, times: 1 });
      const from = h.emu.requests.length;
      const [a, b] = await Promise.all([
        send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '1.00' })),
        send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '2.00' })),
      ]);
      expect(a.body.status).toBe('succeeded');
      expect(b.body.status).toBe('succeeded');
      const [first, second] = refundsSince(from).sort((x, y) => x.receivedAt - y.receivedAt);
      expect(refundsSince(from)).toHaveLength(2);
      // The second refundCreate reached Shopify only once the first was answered.
      expect(second.receivedAt).toBeGreaterThanOrEqual(first.finishedAt ?? Number.POSITIVE_INFINITY);
      expect(await leases(org.orgId)).toEqual([]);
    });

    it('credentials deleted (204) while a refund waits for the order\'s lease: it is not sent with them after the wait (failed EXECUTION_ERROR, nothing sent)', async () => {
      const org = await fresh();
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 700, bodyMatch: REFUND, times: 1 });
      const from = h.emu.requests.length;
      // (.then: a supertest request is sent once it is awaited)
      const a = send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '1.00' })).then((r) => r);
      await waitFor(() => refundsSince(from).length === 1); // A is at Shopify (700 ms), holding the order's lease
      const reads = h.emu.requests.length;
      const b = send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '2.00' })).then((r) => r);
      await waitFor(() => h.emu.requests.slice(reads).some((r) => r.finishedAt !== undefined)); // B has read the order: it waits for the lease
      await new Promise((r) => setTimeout(r, 50));
      expect(refundsSince(from)).toHaveLength(1);
      expect((await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth)).status).toBe(204);
      const [ra, rb] = await Promise.all([a, b]);
      expect(ra.body.status, JSON.stringify(ra.body)).toBe('succeeded');
      // Not CREDENTIALS_INVALID ("the vendor rejected … retrying will not help"): Shopify refused nothing. Nor
      // EXECUTION_ERROR ("may work later"): the org has no credentials now, as a call started a moment later is told.
      expect(rb.body, JSON.stringify(rb.body)).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND' });
      expect(refundsSince(from)).toHaveLength(1);
      const row = await rowOf(h, rb.body.toolCallId);
      expect(row.error_text).toMatch(/deleted while this refund waited for the order; nothing was sent/);
      expect(row.vendor_refused).toBe(false);
      expect(await leases(org.orgId)).toEqual([]);
    });

    it('credentials that could not be checked after the lease (a database blip) are not "replaced": nothing sent, a failure that may work later', async () => {
      const org = await fresh();
      const creds = h.t.app.get(CredentialsService);
      const spy = vi.spyOn(creds, 'stampOf').mockRejectedValueOnce(Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' }));
      try {
        const from = h.emu.requests.length;
        const res = await refund(org, '450789469', '1.25');
        expect(spy).toHaveBeenCalledTimes(1);
        // The gateway's own failure, not Shopify's: EXECUTION_ERROR (not sent), never VENDOR_ERROR.
        expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
        expect(res.body.toolResult.content).toMatch(/temporary problem on its side; nothing was sent to the vendor\. It may work later/);
        expect(refundsSince(from)).toHaveLength(0);
        expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/could not be checked before the refund was sent/);
        expect(await leases(org.orgId)).toEqual([]);
        const again = await refund(org, '450789469', '1.25'); // a new tool call, as the answer says
        expect(again.body.status).toBe('succeeded');
        expect(refundsSince(from)).toHaveLength(1);
      } finally {
        spy.mockRestore();
      }
    });

    it('across replicas: two gateways on one database, one refund each of the same order at once → never overlapping at Shopify', async () => {
      const org = await fresh();
      const other = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500' });
      try {
        h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 250, bodyMatch: REFUND, times: 1 });
        const from = h.emu.requests.length;
        const [a, b] = await Promise.all([
          send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '1.50' })),
          other.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '2.50' })),
        ]);
        expect([a.body.status, b.body.status]).toEqual(['succeeded', 'succeeded']);
        const sent = refundsSince(from).sort((x, y) => x.receivedAt - y.receivedAt);
        expect(sent).toHaveLength(2);
        expect(sent[1].receivedAt).toBeGreaterThanOrEqual(sent[0].finishedAt ?? Number.POSITIVE_INFINITY);
      } finally {
        await other.close();
      }
    });

    it('two orgs connected to the same shop, one refund each of the same order at once → never overlapping at Shopify (the lease is the order\'s)', async () => {
      const [a, b] = [await fresh(), await fresh()];
      const shared = shopDomainOf(a.orgId); // b connects a's shop too
      const put = await h.t.http.put(`/v1/orgs/${b.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: { ...CREDENTIALS.shopify, shopDomain: shared } });
      expect(put.status).toBe(200);
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 250, bodyMatch: REFUND, times: 1 });
      const from = h.emu.requests.length;
      const [ra, rb] = await Promise.all([refund(a, '450789469', '1.25'), refund(b, '450789469', '2.25')]);
      expect([ra.body.status, rb.body.status]).toEqual(['succeeded', 'succeeded']);
      const sent = refundsSince(from).sort((x, y) => x.receivedAt - y.receivedAt);
      expect(sent).toHaveLength(2);
      expect(sent[1].receivedAt).toBeGreaterThanOrEqual(sent[0].finishedAt ?? Number.POSITIVE_INFINITY);
      expect(await h.t.ds.query('SELECT 1 FROM shopify_refund_leases WHERE shop_domain = $1 AND order_id = $2', [shared, '450789469'])).toEqual([]);
    });

    it('an org naming another org\'s shop with a token the shop refuses takes none of its orders\' leases: its refund fails on the read, the shop\'s own refund goes at once', async () => {
      const [b, a] = [await fresh(), await fresh()];
      const shared = shopDomainOf(b.orgId);
      const bogus = 'shpat_not_a_token_of_this_shop_000000';
      // A names B's (public) shop domain with a token the shop refuses (401): A has no access to it.
      const put = await h.t.http.put(`/v1/orgs/${a.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: { shopDomain: shared, accessToken: bogus } });
      expect(put.status).toBe(200);
      // A's order read is slow to be refused (a latency spike). Were the lease taken before it, B's refund of the
      // order would wait out its 1 s bound behind A and fail VENDOR_TIMEOUT, nothing sent.
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_500, bodyMatch: /RefundContext/, times: 1 });
      const refunds = shop.refundCount(12345);
      const from = h.emu.requests.length;
      const readsByA = () => h.emu.requests.slice(from).filter((r) => /RefundContext/.test(r.body) && r.headers['x-shopify-access-token'] === bogus);
      const byA = refund(a, '12345', '1.00').then((r) => r); // sent now
      await waitFor(() => readsByA().length === 1);
      const rb = await refund(b, '12345', '1.00');
      const ra = await byA;
      expect([ra.body.status, ra.body.errorCode]).toEqual(['failed', 'CREDENTIALS_INVALID']);
      expect(rb.body, JSON.stringify(rb.body)).toMatchObject({ status: 'succeeded', result: { orderId: '12345', amount: '1.00' } });
      expect(shop.refundCount(12345) - refunds).toBe(1);
      // B's refund reached Shopify while A's refused read was still in flight: B never waited for A.
      const [sent] = refundsSince(from);
      expect(sent.headers['x-shopify-access-token']).not.toBe(bogus);
      expect(sent.receivedAt).toBeLessThan(readsByA()[0].finishedAt ?? Number.POSITIVE_INFINITY);
      expect(refundsSince(from)).toHaveLength(1);
      expect(await h.t.ds.query('SELECT 1 FROM shopify_refund_leases WHERE shop_domain = $1 AND order_id = $2', [shared, '12345'])).toEqual([]);
    });

    it('a refund that succeeds on its retry (after a 503) gives the order back: its next refund goes at once', async () => {
      const org = await fresh();
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, bodyMatch: REFUND, times: 1 });
      const first = await refund(org, '12345', '1.00');
      expect(first.body.status).toBe('succeeded');
      expect((await rowOf(h, first.body.toolCallId)).retry_count).toBe(1);
      expect(await leases(org.orgId)).toEqual([]);
      const from = h.emu.requests.length;
      const next = await refund(org, '12345', '1.00');
      expect(next.body).toMatchObject({ status: 'succeeded', result: { amount: '1.00' } });
      expect(refundsSince(from)).toHaveLength(1);
    });

    it('after a 429 the lease is given up, and the retry takes it anew with the room check: too little of the budget left → not sent, answered as the 429', async () => {
      const org = await fresh();
      // Retried 1.2 s into a 2 s budget: less than the half the refund's own request is kept.
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'Retry-After': '1.2' }, bodyMatch: REFUND, times: 1 });
      const from = h.emu.requests.length;
      const res = await refund(org, '12345', '1.00');
      // The vendor's last answer, not the retry the gateway kept back: the agent is told to wait, not that Shopify timed out.
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 2 });
      const row = await rowOf(h, res.body.toolCallId);
      expect(row.retry_count).toBe(1);
      expect(row.error_text).toMatch(/; then: too little of the call's time budget was left.*not sent/);
      expect(refundsSince(from)).toHaveLength(1); // the 429'd one only
      expect(await leases(org.orgId)).toEqual([]);
    });

    it('refunds of different orders are not held up by each other', async () => {
      const org = await fresh();
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 600, bodyMatch: /refundCreate[\s\S]*Order\/12345"/, times: 1 });
      const from = h.emu.requests.length;
      const [a, b] = await Promise.all([refund(org, '12345', '1.00'), refund(org, '450789469', '1.00')]);
      expect([a.body.status, b.body.status]).toEqual(['succeeded', 'succeeded']);
      const [slow, other] = [refundsSince(from).find((r) => r.body.includes('Order/12345'))!, refundsSince(from).find((r) => r.body.includes('Order/450789469'))!];
      expect(other.receivedAt).toBeLessThan(slow.finishedAt!);
    });

    it('a lease left by a holder that died expires: the next refund of the order waits for the expiry, then goes', async () => {
      const org = await fresh();
      const [{ until }] = (await h.t.ds.query(
        `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until)
         VALUES ($1, $2, '1001', $3, now() + interval '700 milliseconds') RETURNING extract(epoch FROM lease_until) * 1000 AS until`,
        [org.orgId, shopDomainOf(org.orgId), randomUUID()],
      )) as { until: number }[];
      const from = h.emu.requests.length;
      const res = await refund(org, '1001', '1.00');
      expect(res.body).toMatchObject({ status: 'succeeded', result: { amount: '1.00' } });
      const [sent] = refundsSince(from);
      expect(sent.receivedAt).toBeGreaterThanOrEqual(Number(until) - 20); // one clock, a few ms of rounding
      expect(await leases(org.orgId)).toEqual([]);
    });

    it('a lease held past the wait bound: failed / VENDOR_TIMEOUT, nothing sent to Shopify, and the words say so', async () => {
      const org = await fresh();
      await h.t.ds.query(
        `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until) VALUES ($1, $2, '1001', $3, now() + interval '1 hour')`,
        [org.orgId, shopDomainOf(org.orgId), randomUUID()],
      );
      const from = h.emu.requests.length;
      const res = await refund(org, '1001', '1.00');
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT', toolResult: { is_error: true } });
      expect(res.body.toolResult.content).toMatch(/try again/);
      expect(refundsSince(from)).toHaveLength(0);
      expect((await rowOf(h, res.body.toolCallId)).error_text).toMatch(/another refund of this order was still in flight.*not sent/);
    });

    it('a refund whose outcome is unknown (5xx on every attempt) keeps the order leased until expiry: it may still land at Shopify', async () => {
      const org = await fresh();
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, bodyMatch: REFUND, times: Infinity });
      const res = await refund(org, '12345', '1.00');
      expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
      expect(await leases(org.orgId)).toEqual([{ order_id: '12345', live: true }]);
    });

    it('an attempt that may still land (a 5xx) keeps the lease even when the next attempt ends in a plain refusal (a 429)', async () => {
      const org = await fresh();
      // Attempt 1: an edge 500 (Shopify may go on and apply it). Attempt 2: a 429 with a long Retry-After (not waited for).
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, bodyMatch: REFUND, times: 1 });
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'Retry-After': '3600' }, bodyMatch: REFUND, times: 1 });
      const res = await refund(org, '12345', '1.00');
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
      expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(1);
      // The first attempt may still be running at Shopify: the order's next refund must not overlap it.
      expect(await leases(org.orgId)).toEqual([{ order_id: '12345', live: true }]);
    });
  });
});
