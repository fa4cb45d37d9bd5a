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

  it('without tokens for every item the whole batch is 429 RATE_LIMITED, nothing recorded; after Retry-After it runs', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const batch = (ids: string[]) =>
      h.t.http
        .post(`/v1/runs/${org.runId}/tool-calls:batch`)
        .set(bearer(org.agentKey))
        .send({ toolUses: ids.map((id) => toolUse('order_lookup', { action: 'lookup', orderId: id })) });
    const recorded = async () => Number(((await h.t.ds.query('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: string }])[0].n);

    // The setup spent some of the agent key's tokens (the run's creation): 2 s refill the bucket (8).
    await new Promise((r) => setTimeout(r, 2000));
    // A batch larger than the burst is charged the burst: a full bucket lets it through.
    const first = await batch(Array.from({ length: 10 }, (_, i) => String(1000 + i)));
    expect(first.status).toBe(200);
    expect(first.body.results).toHaveLength(10);
    expect(await recorded()).toBe(10);

    // The bucket refills 4 a second; 8 tokens are not back before 2 s, and this batch needs 8.
    const refused = await batch(Array.from({ length: 8 }, (_, i) => String(2000 + i)));
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body.code).toBe('RATE_LIMITED');
    const wait = Number(refused.headers['retry-after']);
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(2);
    expect(await recorded()).toBe(10);

    // Retry-After is long enough for the whole batch, not just for the next token.
    await new Promise((r) => setTimeout(r, wait * 1000));
    const later = await batch(Array.from({ length: 8 }, (_, i) => String(2000 + i)));
    expect(later.status).toBe(200);
    expect(await recorded()).toBe(18);
  });
});
