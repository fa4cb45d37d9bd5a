import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { eventsOf, rowOf, waitFor } from './support.js';

/**
 * The orphan sweep marks a call `indeterminate` when it has been running longer
 * than VENDOR_TIMEOUT_MS plus the margin, guessing its process died. A live
 * process that kept the outcome (a database outage outlasting that) must still
 * be able to record what really happened.
 */
describe('an outcome that arrives after the orphan sweep gave up on the call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('replaces the sweep’s indeterminate with the real outcome', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'delay', delayMs: 800 });
    // then() sends the request now; the answer is awaited below.
    const sent = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
    await waitFor(() => h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) === 1);
    // As if the call had been at the vendor (or its outcome kept through an outage) for an hour.
    const [[row]] = (await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE run_id = $1 RETURNING id`, [org.runId])) as [{ id: string }[], number];
    expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
    expect((await rowOf(h, row.id)).status).toBe('indeterminate');

    const res = await sent;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ toolCallId: row.id, status: 'succeeded' });
    expect(await rowOf(h, row.id)).toMatchObject({ status: 'succeeded', error_code: null, error_text: null });
    expect((await eventsOf(h, row.id)).map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate', 'tool_call.succeeded']);
  });

  it('does not overwrite an indeterminate an ops reconcile already settled with a note', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const seen = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
    h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'delay', delayMs: 800 });
    const sent = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
    await waitFor(() => h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) > seen);
    const [[row]] = (await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE run_id = $1 RETURNING id`, [org.runId])) as [{ id: string }[], number];
    await h.t.app.get(OrphanSweeperService).sweep();
    await h.t.ds.query(`UPDATE tool_calls SET note = 'checked with the merchant' WHERE id = $1`, [row.id]);
    const res = await sent;
    expect(res.body).toMatchObject({ toolCallId: row.id, status: 'indeterminate' });
    expect((await rowOf(h, row.id)).status).toBe('indeterminate');
  });
});
