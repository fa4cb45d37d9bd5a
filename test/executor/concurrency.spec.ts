import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, send, waitFor } from './support.js';

const LIMIT = 2;
const GRAPHQL = /graphql\.json$/;

/** The in-flight lease per org × vendor (VENDOR_CONCURRENCY_LIMIT). */
describe('concurrency lease through the pipeline', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: String(LIMIT), VENDOR_MAX_RETRIES: '0' });
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const fresh = () => setupOrg(h.t, { tools: ['order_lookup.lookup', 'amazon_query.get_order'], vendors: ['shopify', 'amazon'] });
  const lookupUse = (orderId = '12345') => toolUse('order_lookup', { action: 'lookup', orderId });
  /** Starts LIMIT slow Shopify calls and waits until they are all at the vendor. */
  async function fillLease(org: OrgSetup, delayMs = 500) {
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs, times: LIMIT });
    const before = h.emu.count({ path: GRAPHQL });
    const uses = Array.from({ length: LIMIT }, () => lookupUse());
    // supertest sends only once awaited: .then() starts each request now.
    const inFlight = uses.map((u) => send(h, org, u).then((r) => r));
    await waitFor(() => h.emu.count({ path: GRAPHQL }) - before === LIMIT);
    return { uses, inFlight };
  }

  it('the call beyond the limit gets 429 problem+json CONCURRENCY_LIMIT with Retry-After, an event, and no ledger row', async () => {
    const org = await fresh();
    const { inFlight } = await fillLease(org);
    const third = lookupUse('450789469');
    const res = await send(h, org, third);
    expect(res.status).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body).toMatchObject({ status: 429, code: 'CONCURRENCY_LIMIT' });
    expect(typeof res.body.correlationId).toBe('string');

    const rows = (await h.t.ds.query('SELECT id FROM tool_calls WHERE org_id = $1 AND tool_use_id = $2', [org.orgId, third.id])) as unknown[];
    expect(rows).toHaveLength(0);
    const events = (await h.t.ds.query(`SELECT actor, metadata FROM runtime_ledger_events WHERE org_id = $1 AND type = 'tool_call.rejected'`, [org.orgId])) as {
      actor: unknown;
      metadata: Record<string, unknown>;
    }[];
    // The key that was refused is on the record (no row or other event of the call names it).
    const [{ actor: requester }] = (await h.t.ds.query(`SELECT actor FROM runtime_ledger_events WHERE org_id = $1 AND type = 'tool_call.requested' LIMIT 1`, [org.orgId])) as { actor: unknown }[];
    expect(requester).toMatchObject({ role: 'agent', keyId: expect.any(String) });
    expect(events).toEqual([{ actor: requester, metadata: expect.objectContaining({ errorCode: 'CONCURRENCY_LIMIT', toolName: 'order_lookup', action: 'lookup', vendor: 'shopify' }) }]);

    expect((await Promise.all(inFlight)).map((r) => r.body.status)).toEqual(['succeeded', 'succeeded']);
    // The idempotency key was not used up: the same tool_use now runs.
    const before = h.emu.count({ path: GRAPHQL });
    const again = await send(h, org, third);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'succeeded', replayed: false, result: { orderId: '450789469' } });
    expect(h.emu.count({ path: GRAPHQL }) - before).toBe(1);
  });

  it('is per org × vendor: another vendor of the org and another org still go through', async () => {
    const org = await fresh();
    const other = await fresh();
    const { inFlight } = await fillLease(org, 1_000);
    const [limited, amazon, otherOrg] = await Promise.all([
      call(h, org, 'order_lookup', { action: 'lookup', orderId: '1001' }),
      call(h, org, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }),
      call(h, other, 'order_lookup', { action: 'lookup', orderId: '12345' }),
    ]);
    expect(limited.status).toBe(429);
    expect(amazon.body.status).toBe('succeeded');
    expect(otherOrg.body.status).toBe('succeeded');
    await Promise.all(inFlight);
  });

  it('a duplicate of a call in flight while the lease is full is told it is in progress (409), not limited', async () => {
    const org = await fresh();
    const { uses, inFlight } = await fillLease(org);
    const dup = await send(h, org, uses[0]);
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    await Promise.all(inFlight);
    const replay = await send(h, org, uses[0]);
    expect(replay.body).toMatchObject({ status: 'succeeded', replayed: true });
  });

  it('leases are given back whatever the outcome', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, times: Infinity });
    const failed = await Promise.all([call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' }), call(h, org, 'order_lookup', { action: 'lookup', orderId: '999999' })]);
    expect(failed.map((r) => r.body.errorCode)).toEqual(['VENDOR_ERROR', 'VENDOR_ERROR']);
    h.emu.clearFaults();
    const notFound = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '999999' });
    expect(notFound.body.errorCode).toBe('VENDOR_NOT_FOUND');
    const { inFlight } = await fillLease(org);
    expect((await Promise.all(inFlight)).map((r) => r.body.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('a replay holds no slot while its stored answer is read: a new call beside it is admitted', async () => {
    const org = await fresh();
    const first = lookupUse();
    expect((await send(h, org, first)).body.status).toBe('succeeded');
    // One slot taken by a call at the vendor, the other free.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_400, times: 1 }); // within VENDOR_TIMEOUT_MS (2 s)
    const before = h.emu.count({ path: GRAPHQL });
    const slow = send(h, org, lookupUse()).then((r) => r);
    await waitFor(() => h.emu.count({ path: GRAPHQL }) > before);
    // The replay's read of the stored call made slow (a busy database, a large result).
    const sql = h.t.app.get(Sql) as unknown as { prepared: (text: string, params?: unknown[]) => Promise<unknown[]> };
    const prepared = sql.prepared.bind(sql);
    let slowed = 0;
    sql.prepared = async (text, params) => {
      if (text.includes('AS run_created_by') && slowed++ === 0) await new Promise((r) => setTimeout(r, 1_000));
      return prepared(text, params);
    };
    try {
      const replay = send(h, org, first).then((r) => r);
      await waitFor(() => slowed > 0);
      const fresh = await send(h, org, lookupUse());
      expect([fresh.status, fresh.body.code, fresh.body.status]).toEqual([200, undefined, 'succeeded']);
      expect((await replay).body).toMatchObject({ status: 'succeeded', replayed: true });
    } finally {
      sql.prepared = prepared;
    }
    expect((await slow).body.status).toBe('succeeded');
  });
});
