/**
 * Pinned after a mutation review found nothing did: passes on this code and fails on the mutant
 * reconcile.service.ts:92 `current.status === input.status && current.note === input.note` → `current.status === input.status`.
 * A second reconcile of a settled call with the same status but ANOTHER note (a second operator's evidence) must be
 * 409 NOT_RECONCILABLE: answered 200 with its own note, that operator believes their evidence is on record while the
 * row (and the chained noteDigest) keep the first one's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

describe('reconcile sent again', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_MAX_RETRIES: '0' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('same status and same note: answered again (200); same status, other note: 409, the first note kept', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const ops = (await createKey(h.t, org.orgId, 'ops')).key;
    h.emu.fault({ vendor: 'shopify', kind: 'reset_after' });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'reconcile me twice' }));
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    const id = res.body.toolCallId as string;

    const first = 'operator A: checked the Shopify admin, the note is there';
    expect((await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops)).send({ status: 'succeeded', note: first })).status).toBe(200);
    const again = await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops)).send({ status: 'succeeded', note: first });
    expect(again.status).toBe(200);

    const other = await h.t.http.post(`/v1/tool-calls/${id}/reconcile`).set(bearer(ops)).send({ status: 'succeeded', note: 'operator B: a different finding' });
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ code: 'NOT_RECONCILABLE' });
    const [row] = (await h.t.ds.query('SELECT note FROM tool_calls WHERE id = $1', [id])) as { note: string }[];
    expect(row.note).toBe(first);
  });
});
