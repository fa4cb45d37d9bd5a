import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { emulatorEnv, setupOrg, toolUse } from '../support/scenario.js';
import { bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';

describe('crash recovery and reconcile', () => {
  let emu: VendorEmulator;
  let t: TestApp;
  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
  });
  afterAll(async () => {
    await t?.close();
    await emu?.stop();
  });

  it('a call left running by a dead process becomes indeterminate at start-up, and ops reconcile it once', async () => {
    const first = await startTestApp({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '1000', STALE_RUNNING_MARGIN_MS: '0' });
    const org = await setupOrg(first, { tools: ['shopify_order.add_note'] });
    // A call that was running when its process died (and a young one another replica may still own).
    const stale = randomUUID();
    const young = randomUUID();
    for (const [id, age] of [[stale, '1 hour'], [young, '0 seconds']]) {
      await first.ds.query(
        `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, vendor, status, correlation_id, idempotency_key,
           tool_use_id, action_digest, input_redacted, started_at)
         VALUES ($1, $2, $3, 'support', 'shopify_order', 'add_note', 'shopify', 'running', 'c', $4, $4, $5, '{}', now() - $6::interval)`,
        [id, org.orgId, org.runId, `k-${id}`, 'a'.repeat(64), age],
      );
    }
    await first.close();

    t = await startTestApp({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '60000', STALE_RUNNING_MARGIN_MS: '0' });
    const rows = (await t.ds.query('SELECT id, status, error_code FROM tool_calls WHERE id = ANY($1::uuid[])', [[stale, young]])) as {
      id: string;
      status: string;
      error_code: string | null;
    }[];
    expect(rows.find((r) => r.id === stale)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN' });
    expect(rows.find((r) => r.id === young)).toMatchObject({ status: 'running' });
    const [ev] = (await t.ds.query(`SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1`, [stale])) as { type: string; metadata: { reason: string } }[];
    expect(ev).toMatchObject({ type: 'tool_call.indeterminate', metadata: { reason: 'orphaned' } });

    const ops = await createKey(t, org.orgId, 'ops');
    expect((await t.http.post(`/v1/tool-calls/${stale}/reconcile`).set(bearer(org.agentKey)).send({ status: 'succeeded', note: 'x' })).status).toBe(403);
    const other = await setupOrg(t, { tools: ['order_lookup.lookup'] });
    const otherOps = await createKey(t, other.orgId, 'ops');
    expect((await t.http.post(`/v1/tool-calls/${stale}/reconcile`).set(bearer(otherOps.key)).send({ status: 'succeeded', note: 'x' })).status).toBe(404);
    const bad = await t.http.post(`/v1/tool-calls/${stale}/reconcile`).set(bearer(ops.key)).send({ status: 'running', note: 'x' });
    expect(bad.status).toBe(400);
    const ok = await t.http
      .post(`/v1/tool-calls/${stale}/reconcile`)
      .set(bearer(ops.key))
      .set('X-Correlation-Id', 'ops-reconcile-1')
      .send({ status: 'succeeded', note: 'checked in the Shopify admin: note present' });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id: stale, status: 'succeeded' });
    // The same settlement sent again (a retry after a lost answer) is answered again and writes nothing.
    const resent = await t.http.post(`/v1/tool-calls/${stale}/reconcile`).set(bearer(ops.key)).send({ status: 'succeeded', note: 'checked in the Shopify admin: note present' });
    expect(resent.status).toBe(200);
    expect(resent.body).toEqual(ok.body);
    // Any other settlement of a settled call is refused: another status, or the same status with another note.
    const twice = await t.http.post(`/v1/tool-calls/${stale}/reconcile`).set(bearer(ops.key)).send({ status: 'failed', note: 'again' });
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe('NOT_RECONCILABLE');
    const otherNote = await t.http.post(`/v1/tool-calls/${stale}/reconcile`).set(bearer(ops.key)).send({ status: 'succeeded', note: 'seen in the admin' });
    expect(otherNote.status).toBe(409);
    expect(otherNote.body).toMatchObject({ code: 'NOT_RECONCILABLE', detail: 'only an indeterminate call can be reconciled (this one is succeeded)' });
    const [settled] = (await t.ds.query('SELECT status, note FROM tool_calls WHERE id = $1', [stale])) as { status: string; note: string }[];
    expect(settled).toEqual({ status: 'succeeded', note: 'checked in the Shopify admin: note present' });
    const notIndeterminate = await t.http.post(`/v1/tool-calls/${young}/reconcile`).set(bearer(ops.key)).send({ status: 'failed', note: 'x' });
    expect(notIndeterminate.status).toBe(409);
    const events = (await t.ds.query(`SELECT type, actor, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq`, [stale])) as {
      type: string;
      actor: { keyId: string } | null;
      metadata: Record<string, unknown>;
    }[];
    expect(events.map((e) => e.type)).toEqual(['tool_call.indeterminate', 'tool_call.reconciled']);
    expect(events[1]).toMatchObject({ actor: { keyId: ops.id, correlationId: 'ops-reconcile-1' }, metadata: { from: 'indeterminate', to: 'succeeded' } });
    expect(JSON.stringify(events)).not.toContain('Shopify admin');
  });

  it('a replay of an indeterminate call answers the indeterminate outcome and never runs it again', async () => {
    const org = await setupOrg(t, { tools: ['shopify_order.add_note'] });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'x' });
    emu.fault({ vendor: 'shopify', kind: 'reset_after' });
    const res = await t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(res.body.toolResult.content).toMatch(/unknown/);
    const applied = emu.count({ vendor: 'shopify', applied: true });
    const again = await t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(again.body).toMatchObject({ status: 'indeterminate', replayed: true });
    expect(emu.count({ vendor: 'shopify', applied: true })).toBe(applied);
  });
});
