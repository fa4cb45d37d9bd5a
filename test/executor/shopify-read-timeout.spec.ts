import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, eventsOf, rowOf } from './support.js';

const GRAPHQL = /graphql\.json$/;
const THRESHOLD = 2;
/** Shopify's answer to a query whose run timed out on its side: HTTP 200, no code, no path, no locations (VENDORS.md §1.4). */
const TIMEOUT = { errors: [{ message: 'Timeout' }] };

/**
 * A read answered 200 with top-level GraphQL errors that nothing places before
 * execution (Shopify's execution "Timeout", a code-less internal error) failed
 * on Shopify's side: a transient failure, retried like a 5xx (VENDORS.md §1.6,
 * §5), told to the model as the vendor's trouble and counted by the breaker.
 * Errors that point into the document (parse / validation) stay a refusal.
 */
describe('Shopify read answered 200 with a GraphQL error from its run, through the pipeline', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '6000', CIRCUIT_BREAKER_THRESHOLD: String(THRESHOLD) });
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  // A fresh org per test: the circuit breaker is per org × vendor and must not carry over.
  const fresh = () => setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: ['shopify'] });
  const lookup = (org: OrgSetup) => call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
  const graphqlAnswer = (body: object, times = 1) => ({ vendor: 'shopify' as const, path: GRAPHQL, kind: 'status' as const, status: 200, body, times });
  const count = () => h.emu.count({ path: GRAPHQL });
  const breaker = (org: OrgSetup) => h.t.app.get(RuntimeToolExecutor).breakerFor(org.orgId, 'shopify').current;

  it('a passing "Timeout" is retried and the call succeeds', async () => {
    const org = await fresh();
    h.emu.fault(graphqlAnswer(TIMEOUT));
    const before = count();
    const res = await lookup(org);
    expect(res.body).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } });
    expect(count() - before, 'GraphQL requests sent').toBe(2);
    expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(1);
    const retried = (await eventsOf(h, res.body.toolCallId)).filter((e) => e.type === 'tool_call.retried');
    expect(retried.map((e) => e.metadata)).toEqual([expect.objectContaining({ attempt: 1, reason: 'server_error' })]);
  });

  it('a persistent "Timeout": 1 + 3 attempts, then failed / VENDOR_ERROR as the vendor\'s trouble (vendor_refused false), and it counts against the breaker', async () => {
    const org = await fresh();
    h.emu.fault(graphqlAnswer(TIMEOUT, Infinity));
    const before = count();
    const res = await lookup(org);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', toolResult: { is_error: true } });
    expect(count() - before).toBe(4);
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'failed', error_code: 'VENDOR_ERROR', retry_count: 3, vendor_status: 200, vendor_refused: false });
    expect(res.body.toolResult.content).toBe('The vendor failed on its side, and the action failed. It may work later, as a new tool call.');
    expect(res.body.toolResult.content).not.toContain('Sending the same input again will fail the same way');
    expect(breaker(org)).toBe('closed');
    expect((await lookup(org)).body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(breaker(org)).toBe('open');
  });

  it('a code-less error with neither path nor locations (an internal error) is the same transient failure', async () => {
    const org = await fresh();
    h.emu.fault(graphqlAnswer({ data: null, errors: [{ message: 'Internal error. Looks like something went wrong on our end.' }] }));
    const before = count();
    const res = await lookup(org);
    expect(res.body).toMatchObject({ status: 'succeeded' });
    expect(count() - before).toBe(2);
  });

  it('a validation error (`locations`, a path from the operation) or MAX_COST_EXCEEDED is still a refusal: one request, vendor_refused true, the breaker untouched', async () => {
    for (const error of [
      { message: "Field 'foo' doesn't exist on type 'Order'", locations: [{ line: 3, column: 5 }], path: ['query OrderLookup', 'order', 'foo'], extensions: { code: 'undefinedField' } },
      { message: 'Query cost is 2000, which exceeds the single query max cost limit (1000).', extensions: { code: 'MAX_COST_EXCEEDED' } },
    ]) {
      const org = await fresh();
      h.emu.fault(graphqlAnswer({ errors: [error] }, Infinity));
      const before = count();
      const res = await lookup(org);
      expect(res.body, error.extensions.code).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
      expect(count() - before).toBe(1);
      expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ retry_count: 0, vendor_refused: true });
      expect(res.body.toolResult.content).toContain('Sending the same input again will fail the same way');
      await lookup(org);
      expect(breaker(org)).toBe('closed');
      h.emu.clearFaults();
    }
  });
});
