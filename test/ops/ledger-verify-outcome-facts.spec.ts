import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { setupOrg, startHarness, toolUse, verifyLedger, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

const BLOCK_LOOKUPS = [{ id: 'no-lookups', match: { toolName: 'order_lookup.lookup' }, decision: 'block', riskLevel: 'high', reason: 'incident' }];
const lookup = (orderId = '12345') => toolUse('order_lookup', { action: 'lookup', orderId });

/**
 * What a settled call's row holds beside its status — the result ops views and exports show, the cost usage bills,
 * the vendor status, duration and retries, the time usage windows go by — against the events that recorded them.
 * Each edit is plain SQL within the app role's rights (no trigger bypass); before, verify read none of these
 * columns and answered ok beside a rewritten result or cost.
 */
describe('ledger verify: a call row’s recorded facts against its events', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const post = (org: OrgSetup, use: object) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);

  async function settledCall(rules?: unknown[]): Promise<{ org: OrgSetup; id: string }> {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules });
    const res = await post(org, lookup());
    expect(res.body.status, JSON.stringify(res.body)).toBe(rules ? 'blocked' : 'succeeded');
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });
    return { org, id: res.body.toolCallId as string };
  }

  it.each([
    ['result (output_redacted)', `output_redacted = jsonb_set(output_redacted, '{order}', '"rewritten"')`, 'output'],
    ['result removed', `output_redacted = NULL`, 'output'],
    ['cost', `cost_cents = cost_cents + 100`, 'cost'],
    ['vendor status', `vendor_status = 500`, 'vendor status'],
    ['duration', `duration_ms = coalesce(duration_ms, 0) + 1000`, 'duration'],
    ['retry count', `retry_count = 3`, 'retry count'],
  ])('a succeeded call whose %s is rewritten is a break at its settling event', async (_what, set, named) => {
    const { org, id } = await settledCall();
    await h.t.ds.query(`UPDATE tool_calls SET ${set} WHERE id = $1`, [id]);
    const v = await verifyLedger(h.t, org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its ${named} differs from the one its events recorded`);
  });

  it('a call whose created_at is moved (out of a usage window) is a break at its tool_call.requested event', async () => {
    const { org, id } = await settledCall();
    await h.t.ds.query(`UPDATE tool_calls SET created_at = created_at - interval '40 days' WHERE id = $1`, [id]);
    const v = await verifyLedger(h.t, org.orgId);
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its creation time differs from its tool_call.requested event's`);
  });

  it('a blocked call given a result, a cost or a vendor status it never had is a break', async () => {
    for (const set of [`output_redacted = '{"order":"forged"}'`, 'cost_cents = 7', 'vendor_status = 200', 'duration_ms = 3', 'retry_count = 1']) {
      const { org, id } = await settledCall(BLOCK_LOOKUPS);
      await h.t.ds.query(`UPDATE tool_calls SET ${set} WHERE id = $1`, [id]);
      expect(await verifyLedger(h.t, org.orgId), set).toMatchObject({ ok: false });
    }
  });

  it('the sweep’s charge is held to its event; the late answer’s and a reconcile leave an honest history ok', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const seen = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
    h.emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'delay', delayMs: 800 });
    const sent = post(org, lookup()).then((r) => r);
    await waitFor(() => h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) > seen, 'the lookup at the vendor');
    const [[{ id }]] = (await h.t.ds.query(`UPDATE tool_calls SET started_at = now() - interval '1 hour' WHERE run_id = $1 RETURNING id`, [org.runId])) as [{ id: string }[], number];
    expect(await h.t.app.get(OrphanSweeperService).sweep()).toBeGreaterThanOrEqual(1);
    await sent;
    const [{ cost_cents: cost }] = (await h.t.ds.query('SELECT cost_cents FROM tool_calls WHERE id = $1', [id])) as { cost_cents: number }[];
    expect(cost).toBeGreaterThan(0);
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });
    await h.t.ds.query('UPDATE tool_calls SET cost_cents = 0 WHERE id = $1', [id]);
    expect((await verifyLedger(h.t, org.orgId)).brokenAt?.reason).toBe(`tool call ${id}: its cost differs from the one its events recorded`);
  });
});
