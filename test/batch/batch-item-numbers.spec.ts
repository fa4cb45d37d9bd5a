import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { jsonDepth } from '../../src/common/http/json-body.js';

const TOOLS = ['order_lookup.lookup', 'shopify_order.add_note'];
const lookup = (orderId: unknown) => toolUse('order_lookup', { action: 'lookup', orderId });
const ROUNDED = 'a number in the body would be rounded (an integer beyond 2^53, or more significant digits than a double holds): send it as a string';
const INFINITE = 'a number in the body is too large to represent';

describe('a batch item holding a number JSON cannot carry exactly is that item\'s own 400; the others run', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const postRaw = (org: OrgSetup, text: string, path = 'tool-calls:batch') =>
    h.t.http.post(`/v1/runs/${org.runId}/${path}`).set(bearer(org.agentKey)).set('Content-Type', 'application/json').send(text);
  const callCount = async (org: OrgSetup) => Number(((await h.t.ds.query('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: string }])[0].n);

  it('an integer beyond 2^53 (rounded) and 1e400 (infinite): 400 BAD_REQUEST entries with the single-call words; nothing of them recorded or sent', async () => {
    const org = await setupOrg(h.t, { tools: TOOLS });
    const uses = [lookup('12345'), toolUse('shopify_order', { action: 'add_note', orderId: 'X', note: 'n' }), lookup('Y'), lookup('1001')];
    const text = JSON.stringify({ toolUses: uses }).replace('"orderId":"X"', '"orderId":12345678901234567890').replace('"orderId":"Y"', '"orderId":1e400');
    const sent = h.emu.requests.length;
    const res = await postRaw(org, text);
    expect(res.status).toBe(200);
    const results = res.body.results as Record<string, unknown>[];
    expect(results[0]).toMatchObject({ status: 'succeeded', toolResult: { tool_use_id: uses[0].id } });
    expect(results[1]).toMatchObject({ status: 400, code: 'BAD_REQUEST', detail: ROUNDED });
    expect(results[2]).toMatchObject({ status: 400, code: 'BAD_REQUEST', detail: INFINITE });
    expect(results[3]).toMatchObject({ status: 'succeeded', toolResult: { tool_use_id: uses[3].id } });
    expect(await callCount(org)).toBe(2);
    expect(h.emu.requests.slice(sent).some((r) => /orderUpdate/.test(r.body))).toBe(false);
    expect(h.emu.requests.slice(sent).filter((r) => /OrderLookup/.test(r.body))).toHaveLength(2);
  });

  it('the same number outside the items, its id repeated, or posted alone: refused for the whole body, as before', async () => {
    const org = await setupOrg(h.t, { tools: TOOLS });
    const good = lookup('12345');
    const outside = await postRaw(org, `{"toolUses":[${JSON.stringify(good)}],"x":1e400}`);
    expect(outside.body).toMatchObject({ status: 400, code: 'BAD_REQUEST', detail: INFINITE });
    const dropped = await postRaw(org, `{"toolUses":[1234567890123456789],"toolUses":[${JSON.stringify(good)},{"n":1234567890123456789}]}`);
    expect(dropped.body).toMatchObject({ status: 400, code: 'BAD_REQUEST', detail: ROUNDED });
    const twin = JSON.stringify({ toolUses: [good, { ...lookup('X'), id: good.id }] }).replace('"orderId":"X"', '"orderId":1e400');
    expect((await postRaw(org, twin)).body).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    const alone = await postRaw(org, JSON.stringify(lookup('X')).replace('"orderId":"X"', '"orderId":12345678901234567890'), 'tool-calls');
    expect(alone.body).toMatchObject({ status: 400, code: 'BAD_REQUEST', detail: ROUNDED });
    expect(await callCount(org)).toBe(0);
  });
  it('an item as deeply nested as a single call may be (32) is answered as the single route answers it; its neighbours run', async () => {
    const org = await setupOrg(h.t, { tools: TOOLS });
    const nest = (levels: number): unknown => (levels === 0 ? 1 : { a: nest(levels - 1) });
    const deep = (depth: number) => toolUse('order_lookup', { action: 'lookup', orderId: '12345', x: nest(depth - 2) }, `toolu_deep_${depth}`);
    expect(jsonDepth(JSON.stringify(deep(32)))).toBe(32);
    const single = await postRaw(org, JSON.stringify(deep(32)), 'tool-calls');
    expect([single.status, single.body.errorCode]).toEqual([422, 'INVALID_INPUT']); // x is no param of the lookup
    const res = await postRaw(org, JSON.stringify({ toolUses: [lookup('12345'), { ...deep(32), id: 'toolu_deep_in_batch' }] }));
    expect(res.status, res.text).toBe(200);
    const results = res.body.results as Record<string, unknown>[];
    expect(results.map((r) => [r.status, r.errorCode])).toEqual([['succeeded', null], ['failed', 'INVALID_INPUT']]);
    // One level deeper than a single call may be: the whole batch, as before.
    const tooDeep = await postRaw(org, JSON.stringify({ toolUses: [lookup('12345'), deep(33)] }));
    expect([tooDeep.status, tooDeep.body.code, tooDeep.body.detail]).toEqual([400, 'BAD_REQUEST', 'JSON nesting deeper than 32']);
  });
});
