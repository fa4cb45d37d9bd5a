import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { beginHttpDrain } from '../../src/app.setup.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * A batch of writes stops starting items when the drain begins (beginHttpDrain, what main.ts runs first), not
 * only when its module's shutdown hook runs: app.close() runs the hooks of other modules first, and those may
 * wait on the database (the API keys' last-used flush) while the batch would go on, one write after another.
 */
describe('a batch running when the drain begins', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '10000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('finishes the write at the vendor and starts no other: the rest answer 503 GATEWAY_STOPPING, not started', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    h.emu.reset();
    h.emu.fault({ vendor: 'shopify', kind: 'delay_after', delayMs: 800, times: Infinity });
    const uses = Array.from({ length: 3 }, (_, i) => toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: `drain note ${i}` }));
    const batch = h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: uses }).then((r) => r);
    const notes = () => h.emu.requests.filter((r) => r.body.includes('orderUpdate')).length;
    await waitFor(() => notes() >= 1 || undefined, 'the first note at the vendor');
    beginHttpDrain(h.t.app);
    const res = await batch;
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: 'succeeded' });
    for (const item of res.body.results.slice(1)) expect(item).toMatchObject({ status: 503, code: 'GATEWAY_STOPPING' });
    expect(notes()).toBe(1);
  });
});
