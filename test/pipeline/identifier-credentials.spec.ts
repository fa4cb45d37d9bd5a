import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { AMAZON_REFRESH_TOKEN, SHOPIFY_TOKEN } from '../support/secrets.js';
import { bearer } from '../support/test-app.js';

/**
 * Identifiers a client chooses are stored, hash-chained into ledger events and shown back as sent (an identifier is
 * matched as it is, so it cannot be redacted): a tool_use id, an Idempotency-Key or a run's specialistId holding a
 * token put the token in agent_runs, tool_calls and the run.created event for good. Refused with a 400 that never
 * repeats the value, nothing recorded (the run-wide leak scan reads every row and response for these secrets).
 */
describe('identifiers holding a credential', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  const count = async (sql: string, params: unknown[]) => Number(((await h.t.ds.query(sql, params)) as { n: string }[])[0].n);

  it('a tool_use id or an Idempotency-Key with a token in it: 400 BAD_REQUEST, value not repeated, nothing recorded', async () => {
    const before = await count('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId]);
    const byId = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }, `toolu_${SHOPIFY_TOKEN}`));
    expect([byId.status, byId.body.code]).toEqual([400, 'BAD_REQUEST']);
    expect(byId.body.detail).toMatch(/^id must not hold a credential/);
    const byKey = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .set('Idempotency-Key', `retry-${AMAZON_REFRESH_TOKEN}`)
      .send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    expect([byKey.status, byKey.body.code]).toEqual([400, 'BAD_REQUEST']);
    expect(byKey.body.detail).toMatch(/^Idempotency-Key must not hold a credential/);
    // In a batch, the item is refused, the others run; a duplicated one is refused without repeating it either.
    const tokenUse = () => toolUse('order_lookup', { action: 'lookup', orderId: '1001' }, `toolu_${SHOPIFY_TOKEN}`);
    const batch = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: [tokenUse(), toolUse('order_lookup', { action: 'lookup', orderId: '1002' })] });
    expect(batch.status).toBe(200);
    const [refused, ran] = batch.body.results as { status?: number | string; code?: string }[];
    expect([refused.status, refused.code]).toEqual([400, 'BAD_REQUEST']);
    expect(ran.status).toBe('succeeded');
    const twice = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: [tokenUse(), tokenUse()] });
    expect([twice.status, twice.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    for (const body of [batch.body, twice.body]) expect(JSON.stringify(body)).not.toContain(SHOPIFY_TOKEN.slice(0, 12));
    for (const body of [byId.body, byKey.body]) {
      expect(JSON.stringify(body)).not.toContain(SHOPIFY_TOKEN);
      expect(JSON.stringify(body)).not.toContain(AMAZON_REFRESH_TOKEN);
    }
    expect(await count('SELECT count(*) AS n FROM tool_calls WHERE run_id = $1', [org.runId])).toBe(before + 1); // the batch's other item
    // An ordinary id still runs.
    const ok = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).set('Idempotency-Key', 'order-12-3456789').send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    expect(ok.body.status).toBe('succeeded');
  });

  it('an X-Correlation-Id with a token in it is replaced by a fresh one: not on the ledger row, not echoed, not logged', async () => {
    // A made-up token of Shopify's shape (not a named test secret): what holdsCredentialShape refuses in an Idempotency-Key.
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    const from = h.t.logs.length;
    const res = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .set('X-Correlation-Id', token)
      .send(toolUse('order_lookup', { action: 'lookup', orderId: '1003' }));
    expect(res.status).toBe(200);
    const echoed = res.headers['x-correlation-id'] as string;
    expect(echoed).not.toBe(token);
    expect(echoed).toMatch(/^[0-9a-f-]{36}$/);
    const [row] = (await h.t.ds.query('SELECT correlation_id FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { correlation_id: string }[];
    expect(row.correlation_id).toBe(echoed);
    await new Promise((r) => setTimeout(r, 100));
    expect(h.t.logs.slice(from).join('')).not.toContain(token);
  });

  it("a run's specialistId or conversationId with a token in it: 400 VALIDATION_FAILED, no run", async () => {
    const runs = () => count('SELECT count(*) AS n FROM agent_runs WHERE org_id = $1', [org.orgId]);
    const before = await runs();
    for (const body of [{ specialistId: SHOPIFY_TOKEN }, { specialistId: 'support', conversationId: `conv ${AMAZON_REFRESH_TOKEN}` }]) {
      const res = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send(body);
      expect([res.status, res.body.code], JSON.stringify(res.body)).toEqual([400, 'VALIDATION_FAILED']);
      expect(JSON.stringify(res.body)).toMatch(/(specialistId|conversationId) must not hold a credential/);
      expect(JSON.stringify(res.body)).not.toContain(SHOPIFY_TOKEN);
      expect(JSON.stringify(res.body)).not.toContain(AMAZON_REFRESH_TOKEN);
    }
    expect(await runs()).toBe(before);
  });

  it("a tool permission's specialistId with a token's shape: 400 VALIDATION_FAILED, not stored (no run could have it)", async () => {
    const url = `/v1/orgs/${org.orgId}/tool-permissions`;
    const before = (await h.t.http.get(url).set(bearer(org.adminKey))).body as { items: unknown[] };
    const token = `ghp_${'Q7x2Lm9Pz4Kc8Rt1Vb6Nw3Hy5Jd0Fs2Ga7Ue'}`;
    const res = await h.t.http
      .put(url)
      .set(bearer(org.adminKey))
      .send({ items: [...before.items, { toolName: 'order_lookup', action: 'lookup', specialistId: token, enabled: true }] });
    expect([res.status, res.body.code], JSON.stringify(res.body)).toEqual([400, 'VALIDATION_FAILED']);
    expect(JSON.stringify(res.body)).toMatch(/specialistId must not hold a credential/);
    expect(JSON.stringify(res.body)).not.toContain(token);
    // The run the row was for is refused the same way.
    expect((await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: token })).status).toBe(400);
    expect((await h.t.http.get(url).set(bearer(org.adminKey))).body.items).toEqual(before.items);
  });

  it('a call stored under such an id before they were refused is still replayed, and a resent batch still holds the writes after it', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_refund.create', 'shopify_order.add_note'] });
    const refund = toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '2.00' });
    const note = toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'upgrade: refund issued' });
    const post = (uses: unknown[]) => h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: uses });
    const [r0, n0] = (await post([refund, note])).body.results as Record<string, unknown>[];
    expect(r0).toMatchObject({ status: 'waiting_approval' });
    expect(n0).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS' });
    // As a gateway before the refusal stored it: under an id holding a token's shape (a GitHub classic token's here).
    const storedId = `toolu_ghp_${'Q7x2Lm9Pz4Kc8Rt1Vb6Nw3Hy5Jd0Fs2Ga7Ue'}`;
    await h.t.ds.query(`UPDATE tool_calls SET tool_use_id = $2, idempotency_key = $3 WHERE id = $1`, [r0.toolCallId, storedId, `run:${runId}:${storedId}`]);
    const resent = [{ ...refund, id: storedId }, note];

    const single = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(resent[0]);
    expect([single.status, single.body.status, single.body.replayed], JSON.stringify(single.body)).toEqual([202, 'waiting_approval', true]);
    const from = h.emu.requests.length;
    const [r1, n1] = (await post(resent)).body.results as Record<string, unknown>[];
    expect(r1).toMatchObject({ status: 'waiting_approval', replayed: true });
    expect(n1).toMatchObject({ status: 409, code: 'IDEMPOTENCY_IN_PROGRESS' }); // held behind the refund, not run
    expect(h.emu.requests.slice(from).filter((r) => /upgrade: refund issued/.test(r.body))).toHaveLength(0);
    await h.t.http.post(`/v1/runs/${runId}/cancel`).set(bearer(agentKey)).send({});
  });
});
