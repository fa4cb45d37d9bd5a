import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

describe('a batch spends one rate-limit token per tool_use', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ RATE_LIMIT_RPS: '4' }); // burst 8
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a batch larger than the burst passes a full bucket and leaves the key owing the rest; short of tokens, the whole batch is 429 with a Retry-After for all of it, nothing recorded', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const lookups = (base: number, n: number) => Array.from({ length: n }, (_, i) => toolUse('order_lookup', { action: 'lookup', orderId: String(base + i) }));
    const batch = (base: number, n: number) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: lookups(base, n) });
    const recorded = async () => Number(((await h.t.ds.query('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: string }])[0].n);

    // The setup spent some of the agent key's tokens (the run's creation): a second refills the bucket (8).
    await new Promise((r) => setTimeout(r, 1000));
    const first = await batch(1000, 32);
    expect(first.status).toBe(200);
    expect(first.body.results).toHaveLength(32);
    expect(await recorded()).toBe(32);

    // 24 owed: even one call waits until they are paid back (4 a second), so 32-item batches buy no more than
    // RATE_LIMIT_RPS calls a second. Charged only the burst, the bucket would be empty, not owing: no wait at all
    // once the batch had taken a quarter of a second.
    const single = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(lookups(5000, 1)[0]);
    expect([single.status, single.body.code]).toEqual([429, 'RATE_LIMITED']);
    const singleWait = Number(single.headers['retry-after']);
    expect(singleWait).toBeGreaterThanOrEqual(3); // (1 + 24 − what the batch's own time paid back) / 4

    // A batch of 8 needs 8 on top of the debt: its Retry-After is long enough for all of it.
    const refused = await batch(2000, 8);
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body.code).toBe('RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(singleWait + 1);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(8);
    expect(await recorded()).toBe(32);
  });
});
