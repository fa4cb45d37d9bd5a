import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decidedRefund } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, verifyLedger, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/** A credential's shape, as an agent or a person might paste it (no test secret: any access-token shape is redacted). */
const TOKEN = `shpat_${'0f1e2d3c4b5a69788796a5b4c3d2e1f0'}`;

/**
 * Text the gateway keeps and shows back that its writers chose freely — a run's metadata and end reason, an
 * approval's decision reason, a reconcile note — was stored and shown to ops as sent, a pasted access token whole;
 * a tool's input never is. It now goes as a tool's input does (secrets redacted), and the ledger's digests of the
 * reasons and note are of what is kept, so verify still holds.
 */
describe('free text the gateway keeps: secrets redacted like a tool’s input', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    h?.emu.clearFaults();
    await h?.close();
  });

  it('run metadata and an end reason: the token is not stored nor shown, the rest is', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ops = (await createKey(h.t, org.orgId, 'ops')).key;
    const run = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support', metadata: { shop: { accessToken: TOKEN }, ticket: 'T-42', note: `use ${TOKEN}` } });
    expect(run.status).toBe(201);
    expect(JSON.stringify(run.body)).not.toContain(TOKEN);
    const ended = await h.t.http.post(`/v1/runs/${run.body.id}/cancel`).set(bearer(org.agentKey)).send({ reason: `leaked ${TOKEN} in chat` });
    expect(ended.status).toBe(200);
    const seen = await h.t.http.get(`/v1/runs/${run.body.id}`).set(bearer(ops));
    expect(JSON.stringify(seen.body)).not.toContain(TOKEN);
    expect(seen.body.metadata).toMatchObject({ ticket: 'T-42' });
    expect(seen.body.ended.reason).toMatch(/^leaked .* in chat$/);
    const [stored] = (await h.t.ds.query('SELECT metadata::text AS m FROM agent_runs WHERE id = $1', [run.body.id])) as { m: string }[];
    expect(stored.m).not.toContain(TOKEN);
  });

  it('metadata within its 16 KiB is otherwise kept whole: a long text, a long list (no cut as a tool’s input has)', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const metadata = { blob: 'x'.repeat(11 * 1024), ids: Array.from({ length: 1_500 }, (_, i) => i % 10), key: TOKEN };
    const run = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support', metadata });
    expect(run.status).toBe(201);
    const seen = (await h.t.http.get(`/v1/runs/${run.body.id}`).set(bearer(org.agentKey))).body.metadata;
    expect(seen.blob).toBe(metadata.blob);
    expect(seen.ids).toEqual(metadata.ids);
    expect(seen.key).not.toContain(TOKEN);
  });

  it('an approval’s decision reason and a reconcile note: not stored nor shown; verify still holds', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const ops = (await createKey(h.t, org.orgId, 'ops')).key;
    const { approval } = await decidedRefund(h, org, expert.key, '3.00', 'reject');
    const reasoned = await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key));
    expect(reasoned.body.status).toBe('rejected');
    // decidedRefund gives no reason: decide another with one.
    const second = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '4.00' }));
    const pending = (await h.t.http.get('/v1/approvals').query({ status: 'pending' }).set(bearer(expert.key))).body.items.find((a: { toolCallId: string }) => a.toolCallId === second.body.toolCallId);
    const decided = await h.t.http.post(`/v1/approvals/${pending.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: pending.actionDigest, reason: `customer sent ${TOKEN}` });
    expect(decided.status).toBe(200);
    expect(JSON.stringify(decided.body)).not.toContain(TOKEN);
    expect(decided.body.decisionReason).toMatch(/^customer sent /);

    h.emu.fault({ vendor: 'shopify', kind: 'reset_after' });
    const lost = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'n' }));
    expect(lost.body.status).toBe('indeterminate');
    const note = `checked in admin with ${TOKEN}`;
    const rec = await h.t.http.post(`/v1/tool-calls/${lost.body.toolCallId}/reconcile`).set(bearer(ops)).send({ status: 'succeeded', note });
    expect(rec.status).toBe(200);
    expect(JSON.stringify(rec.body)).not.toContain(TOKEN);
    // Sent again (its answer lost): the same 200, nothing written twice.
    expect((await h.t.http.post(`/v1/tool-calls/${lost.body.toolCallId}/reconcile`).set(bearer(ops)).send({ status: 'succeeded', note })).status).toBe(200);
    const [kept] = (await h.t.ds.query('SELECT note FROM tool_calls WHERE id = $1', [lost.body.toolCallId])) as { note: string }[];
    expect(kept.note).not.toContain(TOKEN);
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM approval_requests WHERE org_id = $1 AND decision_reason LIKE '%' || $2 || '%'`, [org.orgId, TOKEN])) as { n: number }[];
    expect(n).toBe(0);
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });
  });

  it('ended.at is when the run ended, after the wait for the call in flight holding its row, as its run.completed event', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const qr = h.t.ds.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    // What an intent statement in flight holds (ToolCallLedger.writeIntent: the run FOR KEY SHARE).
    await qr.query('SELECT 1 FROM agent_runs WHERE id = $1 FOR KEY SHARE', [org.runId]);
    const ending = h.t.http.post(`/v1/runs/${org.runId}/complete`).set(bearer(org.agentKey)).send({}).then((r) => r);
    await new Promise((r) => setTimeout(r, 1_000));
    const released = Date.now();
    await qr.commitTransaction();
    await qr.release();
    const res = await ending;
    expect(res.status).toBe(200);
    const [ev] = (await h.t.ds.query(`SELECT created_at FROM runtime_ledger_events WHERE run_id = $1 AND type = 'run.completed'`, [org.runId])) as { created_at: Date }[];
    const endedAt = Date.parse(res.body.ended.at as string);
    expect(endedAt).toBeGreaterThanOrEqual(released - 100);
    expect(Math.abs(endedAt - ev.created_at.getTime())).toBeLessThan(200);
  });
});
