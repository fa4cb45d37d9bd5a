import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

const lookup = (orderId: string) => toolUse('order_lookup', { action: 'lookup', orderId });

describe('a batch on an ended run: one 409 unless an item is a call the run made before', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const batch = (org: OrgSetup, toolUses: unknown[]) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses });
  const complete = async (org: OrgSetup) => expect((await h.t.http.post(`/v1/runs/${org.runId}/complete`).set(bearer(org.agentKey)).send({})).status).toBeLessThan(300);
  const callCount = async (org: OrgSetup) => Number(((await h.t.ds.query('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: string }])[0].n);

  it('new calls beside an item that is no tool_use (or holds a number it cannot represent): 409 RUN_NOT_ACTIVE for the batch', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    await complete(org);
    const mixed = await batch(org, [{ type: 'text', text: 'hi' }, lookup('12345')]);
    expect([mixed.status, mixed.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    const text = JSON.stringify({ toolUses: [lookup('X'), lookup('12345')] }).replace('"orderId":"X"', '"orderId":12345678901234567890');
    const numbers = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).set('Content-Type', 'application/json').send(text);
    expect([numbers.status, numbers.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect(await callCount(org)).toBe(0);
  });

  it('an item that is a call the run made before: 200, it replayed, the malformed item its own 400, the new one 409', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const earlier = lookup('12345');
    expect((await batch(org, [earlier])).body.results[0].status).toBe('succeeded');
    await complete(org);
    const res = await batch(org, [{ type: 'text', text: 'hi' }, earlier, lookup('1001')]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    expect(res.body.results[1]).toMatchObject({ status: 'succeeded', replayed: true });
    expect(res.body.results[2]).toMatchObject({ status: 409, code: 'RUN_NOT_ACTIVE' });
    expect(await callCount(org)).toBe(1);
  });

  it('on a run still going, items that are no tool_use are answered per item, as before', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await batch(org, [{ type: 'text', text: 'hi' }, 'x']);
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: { code: string }) => r.code)).toEqual(['BAD_REQUEST', 'BAD_REQUEST']);
  });
});
