import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ToolCallsQueryService } from '../../src/ops/tool-calls-query.service.js';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { send } from '../executor/support.js';

/**
 * Found by a review of tenant isolation. README (RATE_LIMIT_RPS): a ledger list page costs the key a token per 64 KiB
 * "so one key cannot have the gateway decrypt, read and send megabytes many times a second while other orgs wait". The
 * charge was taken only once a page was built: a key's burst of concurrent large pages was all read from the database
 * (each holding a pool connection and its megabytes in memory) before the first put the key in debt, the rest refused
 * only then, and another org's calls took 620–940 ms instead of 8–18. A key's pages are now built one at a time
 * (KeyRateLimiter.listingTurn), and one whose turn comes while the key owes is refused before it is read. (Counted in
 * page reads: the other org's latency during the one page still read depends on the machine's load.)
 */
describe('noisy neighbour: concurrent large list pages of one key', () => {
  let h: Harness;
  let noisy: OrgSetup;
  let victim: OrgSetup;
  const ROWS = 100;
  beforeAll(async () => {
    h = await startHarness({ DB_POOL_SIZE: '20', RATE_LIMIT_RPS: '10' });
    noisy = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    victim = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    const seed = await send(h, noisy, toolUse('amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }));
    expect(seed.body.status).toBe('succeeded');
    // ROWS calls of the noisy org, each with a ~60 KiB redacted output (under the 64 KiB ledger cap): ~6 MiB per page.
    await h.t.ds.query(
      `INSERT INTO tool_calls
       SELECT (jsonb_populate_record(NULL::tool_calls, to_jsonb(t) || jsonb_build_object(
                 'id', gen_random_uuid(), 'tool_use_id', 'toolu_big_' || g, 'idempotency_key', 'big_' || g,
                 'output_redacted', jsonb_build_object('blob', repeat('x', 60000))))).*
         FROM tool_calls t, generate_series(1, $2::int) g WHERE t.id = $1`,
      [seed.body.toolCallId, ROWS],
    );
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  /** Another org's calls, going on while the noisy key's pages are asked for. */
  async function victimCalls(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const res = await send(h, victim, toolUse('amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }));
      expect(res.body.status).toBe('succeeded');
    }
  }
  /** Runs `burst`, counting the tool-call page statements the gateway sends meanwhile (rows read from the database). */
  async function pageReadsDuring<T>(burst: () => Promise<T>): Promise<{ result: T; reads: number }> {
    const ds = (h.t.app.get(ToolCallsQueryService) as unknown as { ds: DataSource }).ds;
    const spy = vi.spyOn(ds, 'query');
    try {
      const result = await burst();
      const reads = spy.mock.calls.filter(([sql]) => typeof sql === 'string' && sql.includes('coalesce(octet_length(output_redacted::text), 0)')).length;
      return { result, reads };
    } finally {
      spy.mockRestore();
    }
  }

  it("one key's burst of concurrent large pages: one is read, the others refused unread", async () => {
    // Burst of RATE_LIMIT_RPS=10 is 20: one key sends 20 page requests at once, each ~6 MiB (~95 tokens).
    const { result: answers, reads } = await pageReadsDuring(async () => {
      const pages = Array.from({ length: 20 }, () => h.t.http.get('/v1/tool-calls').query({ limit: 200 }).set(bearer(noisy.adminKey)).then((r) => r.status));
      await new Promise((r) => setTimeout(r, 30));
      await victimCalls(3); // another org's calls go on meanwhile
      return Promise.all(pages);
    });
    // The key could pay for one such page; the others are refused in their turn, unread (before: 11 of 20 were read).
    expect(answers.sort()).toEqual([200, ...Array<number>(19).fill(429)]);
    expect(reads).toBe(1);
  }, 60_000);

  it("the same for exports: one first batch read, the other exports refused unread", async () => {
    await new Promise((r) => setTimeout(r, 12_000)); // the key's debt from the test before is paid back, its burst full
    const { result: answers, reads } = await pageReadsDuring(async () => {
      const exports = Array.from({ length: 20 }, () => h.t.http.get('/v1/tool-calls/export').query({ format: 'ndjson' }).set(bearer(noisy.adminKey)).then((r) => r.status));
      await new Promise((r) => setTimeout(r, 30));
      await victimCalls(3);
      return Promise.all(exports);
    });
    expect(answers.sort()).toEqual([200, ...Array<number>(19).fill(429)]);
    // The one export answered reads its one batch (6 MB of rows); the 19 refused read none (before: 10 of 20 read theirs).
    expect(reads).toBe(1);
  }, 60_000);
});
