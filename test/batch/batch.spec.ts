import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import type { RecordedRequest } from '../../src/emulator/emulator.types.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { TEST_ADMIN_KEY } from '../support/secrets.js';
import { bearer, createKey } from '../support/test-app.js';

const TOOLS = ['order_lookup.lookup', 'shopify_query.get_product', 'shopify_order.add_note'];
const lookup = (orderId: string) => toolUse('order_lookup', { action: 'lookup', orderId });
const product = (productId: string) => toolUse('shopify_query', { action: 'get_product', productId });
const addNote = (orderId: string, note: string) => toolUse('shopify_order', { action: 'add_note', orderId, note });
/** The emulator's GraphQL body of a lookup of that order (its variables carry the GID). */
const orderRead = (orderId: string) => new RegExp(`OrderLookup[\\s\\S]*"gid://shopify/Order/${orderId}"`);

type Entry = Record<string, unknown> & { toolCallId: string; status: string; result: unknown; truncated: boolean; toolResult: { tool_use_id: string; content: string } };

function batchOf(h: Harness) {
  return (runId: string, key: string, toolUses: unknown[], headers: Record<string, string> = {}) =>
    h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(key)).set(headers).send({ toolUses });
}

describe('batches of tool calls: order, isolation, idempotency, limits', () => {
  let h: Harness;
  let post: ReturnType<typeof batchOf>;
  beforeAll(async () => {
    h = await startHarness();
    post = batchOf(h);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The one emulator request since `from` whose body matches. */
  const requestOf = (from: number, body: RegExp): RecordedRequest => {
    const found = h.emu.requests.slice(from).filter((r) => body.test(r.body));
    expect(found, String(body)).toHaveLength(1);
    return found[0];
  };

  it('[read, read, write, read] with a slow first read: reads overlap, the write runs alone, results in request order', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const uses = [lookup('12345'), product('632910392'), addNote('450789469', 'Customer called about delivery'), lookup('1001')];
    const from = h.emu.requests.length;
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 400, bodyMatch: orderRead('12345') });
    // The second read is slowed too: whichever reaches the vendor first, run one after the other they could not overlap.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 150, bodyMatch: /ProductLookup/ });
    const res = await post(runId, agentKey, uses);

    expect(res.status).toBe(200);
    const results = res.body.results as Entry[];
    expect(results.map((r) => r.toolResult.tool_use_id)).toEqual(uses.map((u) => u.id));
    expect(results.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(results[0].result).toMatchObject({ orderId: '12345' });
    expect(results[1].result).toMatchObject({ productId: '632910392' });
    expect(results[3].result).toMatchObject({ orderId: '1001' });
    expect(h.emu.vendor<ShopifyEmulator>('shopify').order('450789469')?.note).toBe('Customer called about delivery');

    const slow = requestOf(from, orderRead('12345'));
    const fast = requestOf(from, /ProductLookup/);
    const write = requestOf(from, /orderUpdate/);
    const last = requestOf(from, orderRead('1001'));
    expect(slow.finishedAt! - slow.receivedAt).toBeGreaterThanOrEqual(390);
    // The two reads were at the vendor at the same time...
    expect(fast.receivedAt).toBeLessThan(slow.finishedAt!);
    expect(slow.receivedAt).toBeLessThan(fast.finishedAt!);
    // ...the write only after both had answered, and the last read only after the write.
    expect(write.receivedAt).toBeGreaterThanOrEqual(Math.max(slow.finishedAt!, fast.finishedAt!));
    expect(last.receivedAt).toBeGreaterThanOrEqual(write.finishedAt!);
  });

  it('one failing call never stops the others: invalid input, vendor 500, not a tool_use, not in the manifest', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const invalidUse = lookup('not-a-number');
    const uses = [
      lookup('12345'),
      invalidUse,
      product('921728736'),
      { type: 'text', text: 'not a tool_use' },
      toolUse('no_such_tool', { action: 'x' }),
      addNote('12345', 'Gift wrap requested'),
      lookup('1001'),
    ];
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, body: { errors: 'Internal kaboom at shard 7' }, bodyMatch: /ProductLookup/, times: Infinity });
    try {
      const res = await post(runId, agentKey, uses, { 'X-Correlation-Id': 'batch-failing-middle' });
      expect(res.status).toBe(200);
      const [ok1, invalid, vendor500, notToolUse, unknown, write, ok2] = res.body.results as Entry[];
      expect(ok1).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } });
      expect(invalid).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT', toolResult: { tool_use_id: invalidUse.id, is_error: true } });
      expect(invalid.toolResult.content).toContain('orderId');
      expect(vendor500).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', toolResult: { is_error: true } });
      expect(JSON.stringify(vendor500)).not.toContain('kaboom');
      expect(notToolUse).toEqual({
        type: 'https://tool-gateway.dev/problems/bad-request', title: 'Bad request', status: 400, code: 'BAD_REQUEST',
        detail: expect.any(String), correlationId: 'batch-failing-middle',
      });
      expect(unknown).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
      expect(write).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } });
      expect(ok2).toMatchObject({ status: 'succeeded', result: { orderId: '1001' } });

      // Each recorded call has its own ledger row, like a single call; the non-tool_use has none.
      const rows = (await h.t.ds.query('SELECT id, status, error_code, correlation_id FROM tool_calls WHERE run_id = $1', [runId])) as Record<string, unknown>[];
      expect(rows).toHaveLength(6);
      expect(new Set(rows.map((r) => r.correlation_id))).toEqual(new Set(['batch-failing-middle']));
      // The batch's request line names each item's call (null: none) and the item refused before anything was recorded,
      // which leaves no ledger row, event or other line.
      await new Promise((r) => setTimeout(r, 100));
      const lines = h.t.logs
        .flatMap((c) => c.split('\n'))
        .filter((l) => l.includes('batch-failing-middle'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => /^request /.test(String(l.msg)));
      expect(lines).toHaveLength(1);
      const items = res.body.results as Entry[];
      expect(lines[0]).toMatchObject({
        res: { statusCode: 200 },
        refusedItems: [{ index: 3, code: 'BAD_REQUEST' }],
        toolCallIds: items.map((e) => (typeof e.toolCallId === 'string' ? e.toolCallId : null)),
      });
      expect((lines[0].toolCallIds as unknown[]).filter((id) => id === null)).toHaveLength(1);
      expect(lines[0]).not.toHaveProperty('code');
      const run = await h.t.http.get(`/v1/runs/${runId}`).set(bearer(agentKey));
      expect(run.body.status).toBe('running');
    } finally {
      h.emu.clearFaults();
    }
  });

  it('gives every item its own ledger row and key; re-posting the batch replays every item without calling the vendor', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const uses = [lookup('12345'), product('632910392'), addNote('1001', 'Leave at the door'), lookup('1002')];
    const first = await post(runId, agentKey, uses);
    expect(first.status).toBe(200);
    const firstResults = first.body.results as Entry[];
    expect(firstResults.every((r) => r.replayed === false && r.status === 'succeeded')).toBe(true);

    const rows = (await h.t.ds.query('SELECT id, idempotency_key, tool_use_id, status FROM tool_calls WHERE org_id = $1 ORDER BY created_at', [orgId])) as Record<string, string>[];
    expect(rows).toHaveLength(4);
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(firstResults.map((r) => r.toolCallId)));
    for (const u of uses) expect(rows.find((r) => r.tool_use_id === u.id)?.idempotency_key).toBe(`run:${runId}:${u.id}`);
    const requested = (await h.t.ds.query(
      `SELECT tool_call_id, count(*)::int AS n FROM runtime_ledger_events WHERE run_id = $1 AND type = 'tool_call.requested' GROUP BY tool_call_id`,
      [runId],
    )) as { n: number }[];
    expect(requested.map((e) => e.n)).toEqual([1, 1, 1, 1]);

    const vendorCalls = h.emu.count({ vendor: 'shopify' });
    const again = await post(runId, agentKey, uses);
    expect(again.status).toBe(200);
    const againResults = again.body.results as Entry[];
    expect(againResults.map((r) => r.replayed)).toEqual([true, true, true, true]);
    expect(againResults.map((r) => r.toolCallId)).toEqual(firstResults.map((r) => r.toolCallId));
    expect(againResults.map((r) => r.result)).toEqual(firstResults.map((r) => r.result));
    expect(againResults.map((r) => r.toolResult.tool_use_id)).toEqual(uses.map((u) => u.id));
    expect(h.emu.count({ vendor: 'shopify' })).toBe(vendorCalls);
    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE org_id = $1', [orgId])) as [{ n: number }];
    expect(n).toBe(4);

    // A single post of a batch item is the same call (same default key), replayed too.
    const single = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(uses[0]);
    expect(single.status).toBe(200);
    expect(single.body).toMatchObject({ toolCallId: firstResults[0].toolCallId, replayed: true });
  });

  it('refuses the batch as a whole with 400 for a bad envelope, the limit of 32, duplicate ids or an Idempotency-Key; records nothing', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const url = `/v1/runs/${runId}/tool-calls:batch`;
    const over = Array.from({ length: 33 }, (_, i) => lookup(String(1000 + i)));
    const tooMany = await post(runId, agentKey, over);
    expect(tooMany.status).toBe(400);
    expect(tooMany.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(tooMany.body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect(tooMany.body.detail).toContain('32');
    expect((await post(runId, agentKey, [])).body.code).toBe('VALIDATION_FAILED');
    for (const body of [{}, { toolUses: 'x' }, { toolUses: [lookup('1')], extra: true }, [lookup('1')]]) {
      const res = await h.t.http.post(url).set(bearer(agentKey)).send(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    const twin = lookup('12345');
    const dup = await post(runId, agentKey, [twin, lookup('1001'), { ...twin, input: { action: 'lookup', orderId: '1002' } }]);
    expect(dup.status).toBe(400);
    expect(dup.body.detail).toContain(twin.id);
    const keyed = await post(runId, agentKey, [lookup('12345')], { 'Idempotency-Key': 'batch-key-1' });
    expect(keyed.status).toBe(400);
    expect(keyed.body.code).toBe('BAD_REQUEST');
    expect(keyed.body.detail).toMatch(/tool_use id/);

    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE org_id = $1', [orgId])) as [{ n: number }];
    expect(n).toBe(0);
    expect((await post(runId, agentKey, over.slice(0, 32))).status).toBe(200);
  });

  it('answers 404 for another org’s run and 403 for a non-agent, non-admin key; the single-call route still works beside it', async () => {
    const a = await setupOrg(h.t, { tools: TOOLS });
    const b = await setupOrg(h.t, { tools: TOOLS });
    const cross = await post(a.runId, b.agentKey, [lookup('12345')]);
    const random = await post(randomUUID(), b.agentKey, [lookup('12345')]);
    expect(cross.status).toBe(404);
    expect(cross.body.code).toBe('RUN_NOT_FOUND');
    expect({ ...cross.body, correlationId: 0 }).toEqual({ ...random.body, correlationId: 0 });
    // API.md §1: an admin may do everything an agent may, in its org; another org's admin sees no run.
    const byAdmin = await post(a.runId, a.adminKey, [lookup('12345')]);
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body.results[0]).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } });
    const crossAdmin = await post(a.runId, b.adminKey, [lookup('12345')]);
    expect(crossAdmin.status).toBe(404);
    expect(crossAdmin.body.code).toBe('RUN_NOT_FOUND');
    expect((await post(a.runId, (await createKey(h.t, a.orgId, 'ops')).key, [lookup('12345')])).status).toBe(403);
    const platform = await post(a.runId, TEST_ADMIN_KEY, [lookup('12345')]);
    expect(platform.status).toBe(403);
    expect(platform.body).toMatchObject({ code: 'FORBIDDEN' });
    expect(platform.body.detail).toMatch(/platform key/);
    const single = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(lookup('12345'));
    expect(single.status).toBe(200);
    expect(single.body.status).toBe('succeeded');
    expect((await h.t.http.post(`/v1/runs/${a.runId}/tool-callsXbatch`).set(bearer(a.agentKey)).send({ toolUses: [] })).status).toBe(404);

    const doc = await h.t.http.get('/openapi.json');
    const op = doc.body.paths['/v1/runs/{runId}/tool-calls:batch']?.post;
    expect(op.requestBody.content['application/json'].schema.properties.toolUses.maxItems).toBe(32);
    expect(op.requestBody.description).toContain('32');
  });
});

describe('batches of tool calls: the batch-wide budget', () => {
  let h: Harness;
  let post: ReturnType<typeof batchOf>;
  const BUDGET = 4096;
  beforeAll(async () => {
    h = await startHarness({ BATCH_BUDGET_BYTES: String(BUDGET), RESULT_BUDGET_BYTES: '3000' });
    post = batchOf(h);
    // Bigger orders (multi-byte names, so a cut could land inside a character): about 3.5 KB, 0.8 KB and 7.2 KB of JSON (each line item with its unit price).
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const grow = (orderId: string, n: number) => {
      const order = shop.order(orderId)!;
      for (let i = 0; i < n; i++) {
        order.lineItems.push({ id: 90_000 + i, name: `Größe ${i} ${'é'.repeat(40)}`, title: 'Größe', sku: null, quantity: 1, priceCents: 100 });
      }
    };
    grow('12345', 20);
    grow('1001', 2);
    grow('450789469', 48);
  });
  afterAll(async () => {
    await h?.close();
  });

  const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
  const total = (results: Entry[]) => results.reduce((n, r) => n + bytes(r.toolResult.content), 0);
  const fullResult = async (key: string, r: Entry) => {
    const got = await h.t.http.get(`/v1/tool-calls/${r.toolCallId}/result`).set(bearer(key));
    expect(got.status).toBe(200);
    return got.body as Entry;
  };

  it('truncates the largest result first, only as far as needed; the full result stays retrievable', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const uses = [product('632910392'), lookup('1001'), lookup('12345'), addNote('1002', 'Call back tomorrow'), product('921728736')];
    const res = await post(runId, agentKey, uses);
    expect(res.status).toBe(200);
    const results = res.body.results as Entry[];
    expect(results.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(results.map((r) => r.truncated)).toEqual([false, false, true, false, false]);
    expect(total(results)).toBeLessThanOrEqual(BUDGET);

    const cut = results[2];
    expect(cut.result).toBeNull();
    expect(cut.toolResult.content).toContain('[truncated:');
    expect(cut.toolResult.content).toContain(`GET /v1/tool-calls/${cut.toolCallId}/result`);
    expect(cut.toolResult.content).not.toContain('\uFFFD');
    const full = await fullResult(agentKey, cut);
    expect(full).toMatchObject({ toolCallId: cut.toolCallId, status: 'succeeded' });
    expect(full.result).not.toBeNull(); // the whole result (its toolResult.content is cut to the per-result budget, as every answer's)
    const fullText = JSON.stringify(full.result);
    expect(bytes(fullText)).toBeGreaterThan(bytes(results[1].toolResult.content)); // it was the largest
    expect(fullText.startsWith(cut.toolResult.content.slice(0, cut.toolResult.content.indexOf('\n[truncated:')))).toBe(true);
    expect((full.result as { items: unknown[] }).items).toHaveLength(22);
    // Only as far as needed: the cut result keeps the room the others leave, less the value the cut stepped back over
    // to end between values (jsonPrefix: a key and a value of at most some 256 characters).
    const room = BUDGET - (total(results) - bytes(cut.toolResult.content));
    expect(bytes(cut.toolResult.content)).toBeGreaterThan(room - 16 - 300);
  });

  // API.md §9: the batch budget "counts every result's model-facing content, truncated ones included", and it
  // "truncates the largest results first": a result already cut by the per-result budget is cut further when it is the largest.
  it('cuts a result already truncated by the per-result budget further when it is the largest (it counts)', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const uses = [lookup('450789469'), lookup('12345'), lookup('1001'), product('108828309')];
    const res = await post(runId, agentKey, uses);
    expect(res.status).toBe(200);
    const results = res.body.results as Entry[];
    const [already, largest, next, small] = results;
    expect(already.truncated).toBe(true);
    expect(bytes(already.toolResult.content)).toBeLessThan(2900); // cut again, below the per-result cut to 3000 bytes
    expect(already.toolResult.content).toContain(`GET /v1/tool-calls/${already.toolCallId}/result`);
    expect(already.toolResult.content).not.toContain('\uFFFD');
    expect(largest.truncated).toBe(true);
    expect(total(results)).toBeLessThanOrEqual(BUDGET);
    // Water-filling, largest first: the biggest two are cut, the smaller ones survive whole.
    expect(next).toMatchObject({ truncated: false, result: { orderId: '1001' } });
    expect(small).toMatchObject({ truncated: false, result: { productId: '108828309' } });
    for (const r of [already, largest]) {
      const full = await fullResult(agentKey, r);
      expect(full).toMatchObject({ status: 'succeeded' });
      const fullText = JSON.stringify(full.result);
      expect(fullText).not.toContain('\uFFFD');
      expect(fullText.startsWith(r.toolResult.content.slice(0, r.toolResult.content.indexOf('\n[truncated:')))).toBe(true);
    }
  });

  it('keeps a batch of results all cut by the per-result budget within the batch budget', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: TOOLS });
    const res = await post(runId, agentKey, [lookup('450789469'), lookup('450789469')]);
    expect(res.status).toBe(200);
    const results = res.body.results as Entry[];
    expect(results.map((r) => [r.status, r.truncated])).toEqual([['succeeded', true], ['succeeded', true]]);
    expect(total(results)).toBeLessThanOrEqual(BUDGET); // 2 × 3000 bytes before the fix
    for (const r of results) {
      expect(bytes(r.toolResult.content)).toBeGreaterThan(BUDGET / 2 - 16); // fair shares
      expect(r.toolResult.content).toContain(`GET /v1/tool-calls/${r.toolCallId}/result`);
      expect((await fullResult(agentKey, r)).result).not.toBeNull();
    }
  });
});
